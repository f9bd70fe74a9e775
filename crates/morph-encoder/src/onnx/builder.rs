//! A small graph builder: adds nodes and constants, naming every value itself.

use super::proto::{Attr, Graph, Node, TensorData, ValueInfo, Values};

#[derive(Debug, Default)]
pub(crate) struct Builder {
    graph: Graph,
    next: usize,
}

impl Builder {
    pub(crate) fn new(name: &str) -> Self {
        Self { graph: Graph { name: name.to_string(), ..Graph::default() }, next: 0 }
    }

    fn fresh(&mut self, stem: &str) -> String {
        self.next += 1;
        format!("{stem}_{}", self.next)
    }

    /// Adds a one-output node of `op` and returns its output's name.
    pub(crate) fn op(
        &mut self,
        op: &'static str,
        inputs: &[&str],
        attrs: Vec<(&'static str, Attr)>,
    ) -> String {
        let [output] = self.op_n(op, inputs, attrs);
        output
    }

    /// Adds a node of `op` with `N` outputs and returns their names.
    pub(crate) fn op_n<const N: usize>(
        &mut self,
        op: &'static str,
        inputs: &[&str],
        attrs: Vec<(&'static str, Attr)>,
    ) -> [String; N] {
        self.node(op, None, inputs, attrs)
    }

    /// Adds a one-output node of ONNX Runtime's contrib operator `op`.
    pub(crate) fn contrib_op(&mut self, op: &'static str, inputs: &[&str]) -> String {
        let [output] = self.node(op, Some(super::proto::CONTRIB), inputs, Vec::new());
        output
    }

    /// Adds a node of Morph's own operator `op` ([`crate::ort_kernels`]) with `N` outputs.
    pub(crate) fn morph_op<const N: usize>(&mut self, op: &'static str, inputs: &[&str]) -> [String; N] {
        self.node(op, Some(crate::ort_kernels::DOMAIN), inputs, Vec::new())
    }

    /// Adds a node of `op` from operator set `domain` with `N` fresh outputs.
    fn node<const N: usize>(
        &mut self,
        op: &'static str,
        domain: Option<&'static str>,
        inputs: &[&str],
        attrs: Vec<(&'static str, Attr)>,
    ) -> [String; N] {
        let outputs: [String; N] = std::array::from_fn(|_| self.fresh(op));
        self.graph.nodes.push(Node {
            op,
            domain,
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            outputs: outputs.to_vec(),
            attrs,
        });
        outputs
    }

    /// A constant of shape `dims` named from `stem`, stored in the graph.
    fn initializer(&mut self, stem: &str, dims: &[usize], values: Values) -> String {
        let name = self.fresh(stem);
        let dims = dims.iter().map(|&d| d as i64).collect();
        self.graph.initializers.push(TensorData { name: name.clone(), dims, values });
        name
    }

    /// An int8 constant of shape `dims` (quantised weights).
    pub(crate) fn i8s(&mut self, stem: &str, dims: &[usize], data: Vec<i8>) -> String {
        self.initializer(stem, dims, Values::I8(data))
    }

    /// An int32 constant of shape `dims` (exact integer sums).
    pub(crate) fn i32s(&mut self, stem: &str, dims: &[usize], data: Vec<i32>) -> String {
        self.initializer(stem, dims, Values::I32(data))
    }

    /// A zero-dimensional uint8 constant (a quantised tensor's zero point).
    pub(crate) fn u8_scalar(&mut self, value: u8) -> String {
        self.initializer("zero_point", &[], Values::U8(vec![value]))
    }

    /// Renames the value `from` to `to` (an Identity node), e.g. to give an output its name.
    pub(crate) fn name_output(&mut self, from: &str, to: &str) {
        self.graph.nodes.push(Node {
            op: "Identity",
            domain: None,
            inputs: vec![from.to_string()],
            outputs: vec![to.to_string()],
            attrs: Vec::new(),
        });
    }

    /// A float constant of shape `dims`.
    pub(crate) fn f32s(&mut self, stem: &str, dims: &[usize], data: Vec<f32>) -> String {
        self.initializer(stem, dims, Values::F32(data))
    }

    /// A float scalar constant.
    pub(crate) fn scalar(&mut self, v: f32) -> String {
        self.f32s("const", &[], vec![v])
    }

    /// A one-dimensional int64 constant (shapes, axes).
    pub(crate) fn i64s(&mut self, values: &[i64]) -> String {
        self.i64_table("ints", &[values.len()], values.to_vec())
    }

    /// An int64 constant of shape `dims` (an index table).
    pub(crate) fn i64_table(&mut self, stem: &str, dims: &[usize], values: Vec<i64>) -> String {
        self.initializer(stem, dims, Values::I64(values))
    }

    /// A zero-dimensional int64 constant (an axis given as a tensor).
    pub(crate) fn i64_scalar(&mut self, value: i64) -> String {
        self.initializer("int", &[], Values::I64(vec![value]))
    }

    pub(crate) fn input(&mut self, info: ValueInfo) {
        self.graph.inputs.push(info);
    }

    pub(crate) fn output(&mut self, info: ValueInfo) {
        self.graph.outputs.push(info);
    }

    pub(crate) fn finish(self) -> Graph {
        self.graph
    }
}
