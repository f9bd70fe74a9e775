//! The ONNX file format: the messages of `onnx.proto` that Morph writes, encoded with the
//! protobuf wire format (varints, length-delimited fields; repeated scalars unpacked, which
//! every parser accepts). Field numbers are those of `onnx.proto` (IR version 8).

/// Element types (`TensorProto.DataType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataType {
    Float = 1,
    Uint8 = 2,
    Int8 = 3,
    Int32 = 6,
    Int64 = 7,
    BFloat16 = 16,
}

/// An initializer: a named constant tensor stored in the graph.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorData {
    pub name: String,
    pub dims: Vec<i64>,
    pub values: Values,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    F32(Vec<f32>),
    U8(Vec<u8>),
    I8(Vec<i8>),
    I32(Vec<i32>),
    I64(Vec<i64>),
}

/// A node attribute (`AttributeProto` with its `type`).
#[derive(Debug, Clone, PartialEq)]
pub enum Attr {
    Int(i64),
    Float(f32),
    Ints(Vec<i64>),
    Str(&'static str),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub op: &'static str,
    /// The operator set the op is from: ONNX's own (`None`) or ONNX Runtime's contrib ops.
    pub domain: Option<&'static str>,
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub attrs: Vec<(&'static str, Attr)>,
}

/// One dimension of a graph input or output: fixed, or a named free dimension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dim {
    Fixed(i64),
    Free(&'static str),
}

/// A graph input or output (`ValueInfoProto` of a tensor type).
#[derive(Debug, Clone, PartialEq)]
pub struct ValueInfo {
    pub name: String,
    pub elem: DataType,
    pub dims: Vec<Dim>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Graph {
    pub name: String,
    pub nodes: Vec<Node>,
    pub initializers: Vec<TensorData>,
    pub inputs: Vec<ValueInfo>,
    pub outputs: Vec<ValueInfo>,
}

/// ONNX IR version 8 goes with opsets up to 18.
const IR_VERSION: i64 = 8;
/// The default-domain opset the graphs use (`LayerNormalization` needs 17).
pub const OPSET: i64 = 17;
/// ONNX Runtime's contrib operators (`DynamicQuantizeMatMul`), version 1.
pub const CONTRIB: &str = "com.microsoft";

impl Graph {
    /// The serialised `ModelProto` holding this graph.
    pub fn to_model_bytes(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.int(1, IR_VERSION);
        w.string(2, "morph");
        w.string(3, env!("CARGO_PKG_VERSION"));
        w.message(7, |g| self.write(g));
        w.message(8, |o| {
            o.string(1, "");
            o.int(2, OPSET);
        });
        for domain in [CONTRIB, crate::ort_kernels::DOMAIN] {
            w.message(8, |o| {
                o.string(1, domain);
                o.int(2, 1);
            });
        }
        w.buf
    }

    fn write(&self, w: &mut Writer) {
        for node in &self.nodes {
            w.message(1, |n| node.write(n));
        }
        w.string(2, &self.name);
        for tensor in &self.initializers {
            w.message(5, |t| tensor.write(t));
        }
        for input in &self.inputs {
            w.message(11, |v| input.write(v));
        }
        for output in &self.outputs {
            w.message(12, |v| output.write(v));
        }
    }
}

impl Node {
    fn write(&self, w: &mut Writer) {
        self.inputs.iter().for_each(|i| w.string(1, i));
        self.outputs.iter().for_each(|o| w.string(2, o));
        w.string(4, self.op);
        if let Some(domain) = self.domain {
            w.string(7, domain);
        }
        for (name, attr) in &self.attrs {
            w.message(5, |a| {
                a.string(1, name);
                // AttributeProto.type: FLOAT = 1, INT = 2, STRING = 3, INTS = 7.
                match attr {
                    Attr::Float(f) => {
                        a.float(2, *f);
                        a.int(20, 1);
                    }
                    Attr::Int(i) => {
                        a.int(3, *i);
                        a.int(20, 2);
                    }
                    Attr::Str(text) => {
                        a.string(4, text);
                        a.int(20, 3);
                    }
                    Attr::Ints(is) => {
                        is.iter().for_each(|i| a.int(8, *i));
                        a.int(20, 7);
                    }
                }
            });
        }
    }
}

impl TensorData {
    fn write(&self, w: &mut Writer) {
        self.dims.iter().for_each(|d| w.int(1, *d));
        let (elem, raw): (DataType, Vec<u8>) = match &self.values {
            Values::F32(v) => (DataType::Float, v.iter().flat_map(|x| x.to_le_bytes()).collect()),
            Values::U8(v) => (DataType::Uint8, v.clone()),
            Values::I8(v) => (DataType::Int8, v.iter().map(|x| x.to_le_bytes()[0]).collect()),
            Values::I32(v) => (DataType::Int32, v.iter().flat_map(|x| x.to_le_bytes()).collect()),
            Values::I64(v) => (DataType::Int64, v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        };
        w.int(2, elem as i64);
        w.string(8, &self.name);
        w.bytes(9, &raw);
    }
}

impl ValueInfo {
    fn write(&self, w: &mut Writer) {
        w.string(1, &self.name);
        // TypeProto.tensor_type { elem_type, shape { dim { dim_value | dim_param } } }
        w.message(2, |t| {
            t.message(1, |tensor| {
                tensor.int(1, self.elem as i64);
                tensor.message(2, |shape| {
                    for dim in &self.dims {
                        shape.message(1, |d| match dim {
                            Dim::Fixed(n) => d.int(1, *n),
                            Dim::Free(name) => d.string(2, name),
                        });
                    }
                });
            });
        });
    }
}

/// Protobuf wire-format encoder.
#[derive(Debug, Default)]
struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    fn tag(&mut self, field: u32, wire_type: u8) {
        self.varint(u64::from(field) << 3 | u64::from(wire_type));
    }

    /// int32/int64/enum: a varint of the two's-complement value.
    fn int(&mut self, field: u32, v: i64) {
        self.tag(field, 0);
        self.varint(v as u64);
    }

    fn float(&mut self, field: u32, v: f32) {
        self.tag(field, 5);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.tag(field, 2);
        self.varint(b.len() as u64);
        self.buf.extend_from_slice(b);
    }

    fn string(&mut self, field: u32, s: &str) {
        self.bytes(field, s.as_bytes());
    }

    fn message(&mut self, field: u32, body: impl FnOnce(&mut Writer)) {
        let mut inner = Writer::default();
        body(&mut inner);
        self.bytes(field, &inner.buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_fields_follow_the_wire_format() {
        let mut w = Writer::default();
        w.int(1, 150);
        assert_eq!(w.buf, [0x08, 0x96, 0x01]);
        let mut w = Writer::default();
        w.int(2, -1);
        assert_eq!(w.buf.len(), 11, "negative ints take ten varint bytes");
        let mut w = Writer::default();
        w.string(2, "testing");
        assert_eq!(w.buf, [0x12, 0x07, b't', b'e', b's', b't', b'i', b'n', b'g']);
        let mut w = Writer::default();
        w.message(3, |m| m.int(1, 150));
        assert_eq!(w.buf, [0x1a, 0x03, 0x08, 0x96, 0x01]);
    }
}
