//! Cohere's `embedding_types`: each unit vector as floats, as 8-bit integers (scaled by the
//! vector's own largest magnitude to ±127), as bits (one per dimension, set where the value is
//! positive, packed eight to a byte, first dimension in the high bit), or as base64 of its
//! little-endian f32s.

use base64::Engine as _;
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EmbeddingType {
    Float,
    Int8,
    Uint8,
    Binary,
    Ubinary,
    Base64,
}

impl EmbeddingType {
    const ALL: [(&'static str, EmbeddingType); 6] = [
        ("float", EmbeddingType::Float),
        ("int8", EmbeddingType::Int8),
        ("uint8", EmbeddingType::Uint8),
        ("binary", EmbeddingType::Binary),
        ("ubinary", EmbeddingType::Ubinary),
        ("base64", EmbeddingType::Base64),
    ];

    /// Every type's name, as a call writes it.
    pub(super) fn names() -> [&'static str; 6] {
        Self::ALL.map(|(n, _)| n)
    }

    pub(super) fn parse(name: &str) -> Result<Self, String> {
        let names = || Self::names().join(", ");
        Self::ALL
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| *t)
            .ok_or_else(|| format!("{name:?} is not one of {}", names()))
    }

    pub(super) fn name(self) -> &'static str {
        Self::ALL.iter().find(|(_, t)| *t == self).map_or("float", |(n, _)| n)
    }

    /// `vectors` in this type.
    pub(super) fn encode(self, vectors: &[Vec<f32>]) -> Value {
        let each = vectors.iter().map(|v| match self {
            EmbeddingType::Float => json!(v),
            EmbeddingType::Int8 => json!(int8(v)),
            EmbeddingType::Uint8 => {
                json!(int8(v).iter().map(|&q| (i16::from(q) + 128) as u8).collect::<Vec<_>>())
            }
            EmbeddingType::Binary => {
                json!(bits(v).iter().map(|&b| (i16::from(b) - 128) as i8).collect::<Vec<_>>())
            }
            EmbeddingType::Ubinary => json!(bits(v)),
            EmbeddingType::Base64 => {
                let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                json!(base64::engine::general_purpose::STANDARD.encode(bytes))
            }
        });
        Value::Array(each.collect())
    }
}

/// `v` scaled so its largest magnitude is 127, rounded.
fn int8(v: &[f32]) -> Vec<i8> {
    let peak = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    let scale = if peak > 0.0 { 127.0 / peak } else { 0.0 };
    v.iter().map(|x| (x * scale).round().clamp(-127.0, 127.0) as i8).collect()
}

/// One bit per dimension (set where positive), packed eight to a byte, high bit first.
fn bits(v: &[f32]) -> Vec<u8> {
    v.chunks(8)
        .map(|chunk| {
            chunk.iter().enumerate().fold(0u8, |byte, (i, &x)| byte | (u8::from(x > 0.0) << (7 - i)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_type_writes_the_vector_as_cohere_does() {
        let v = vec![vec![0.5, -0.25, 0.0, 0.1, -0.5, 0.2, 0.3, -0.1, 0.4]];
        assert_eq!(EmbeddingType::Int8.encode(&v), json!([[127, -64, 0, 25, -127, 51, 76, -25, 102]]));
        assert_eq!(EmbeddingType::Uint8.encode(&v)[0][0], json!(255));
        // Positive dimensions 0, 3, 5, 6 then 8: 0b1001_0110, 0b1000_0000.
        assert_eq!(EmbeddingType::Ubinary.encode(&v), json!([[150, 128]]));
        assert_eq!(EmbeddingType::Binary.encode(&v), json!([[22, 0]]));
        assert_eq!(EmbeddingType::Float.encode(&v)[0].as_array().map(Vec::len), Some(9));
        let b64 = EmbeddingType::Base64.encode(&v)[0].as_str().map(str::len);
        assert_eq!(b64, Some(48), "9 f32s are 36 bytes, 48 base64 characters");
        assert!(EmbeddingType::parse("int4").unwrap_err().contains("float, int8"));
        assert_eq!(EmbeddingType::parse("ubinary").map(EmbeddingType::name), Ok("ubinary"));
    }
}
