//! Runtimes: the shapes an engine instance executes batches in.
//!
//! A *fixed* runtime pads every batch to exactly `(max_len, max_batch)` (Arlo's statically
//! compiled runtime). A *dynamic* runtime pads only to the longest sequence in the batch and
//! runs as many rows as it was given (what TEI does on CPU).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ShapeKind {
    Fixed,
    Dynamic,
}

/// The shape contract of a runtime: the longest sequence it accepts and the most rows per batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RuntimeSpec {
    pub kind: ShapeKind,
    pub max_len: u32,
    pub max_batch: u32,
}

/// The tensor shape a batch actually runs at, after padding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PaddedShape {
    pub len: u32,
    pub batch: u32,
}

impl PaddedShape {
    /// Tokens the engine computes on, padding included.
    pub fn tokens(self) -> u64 {
        u64::from(self.len) * u64::from(self.batch)
    }
}

impl RuntimeSpec {
    pub fn fixed(max_len: u32, max_batch: u32) -> Self {
        Self { kind: ShapeKind::Fixed, max_len, max_batch }
    }

    pub fn dynamic(max_len: u32, max_batch: u32) -> Self {
        Self { kind: ShapeKind::Dynamic, max_len, max_batch }
    }

    /// The padded shape a batch of sequences with these lengths runs at.
    /// `longest` is the longest sequence and `rows` the number of sequences.
    pub fn padded_shape(&self, longest: u32, rows: u32) -> PaddedShape {
        match self.kind {
            ShapeKind::Fixed => PaddedShape { len: self.max_len, batch: self.max_batch },
            ShapeKind::Dynamic => PaddedShape { len: longest, batch: rows },
        }
    }

    pub fn fits(&self, len: u32) -> bool {
        len <= self.max_len
    }
}

impl fmt::Display for RuntimeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            ShapeKind::Fixed => "fixed",
            ShapeKind::Dynamic => "dynamic",
        };
        write!(f, "{kind}:{}x{}", self.max_len, self.max_batch)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("runtime '{0}' is not KIND:MAX_LENxMAX_BATCH, e.g. fixed:128x8 or dynamic:512x32")]
pub struct ParseRuntimeError(String);

impl FromStr for RuntimeSpec {
    type Err = ParseRuntimeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseRuntimeError(s.to_string());
        let (kind, dims) = s.split_once(':').ok_or_else(err)?;
        let (len, batch) = dims.split_once('x').ok_or_else(err)?;
        let max_len: u32 = len.parse().map_err(|_| err())?;
        let max_batch: u32 = batch.parse().map_err(|_| err())?;
        if max_len == 0 || max_batch == 0 {
            return Err(err());
        }
        match kind {
            "fixed" => Ok(Self::fixed(max_len, max_batch)),
            "dynamic" => Ok(Self::dynamic(max_len, max_batch)),
            _ => Err(err()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        let r: RuntimeSpec = "fixed:128x8".parse().unwrap();
        assert_eq!(r, RuntimeSpec::fixed(128, 8));
        assert_eq!(r.to_string(), "fixed:128x8");
        assert!("dynamic:0x8".parse::<RuntimeSpec>().is_err());
        assert!("static:128x8".parse::<RuntimeSpec>().is_err());
        assert!("fixed:128".parse::<RuntimeSpec>().is_err());
    }

    #[test]
    fn fixed_pads_to_its_shape_dynamic_to_the_batch() {
        let f = RuntimeSpec::fixed(128, 8);
        let d = RuntimeSpec::dynamic(512, 32);
        assert_eq!(f.padded_shape(10, 3), PaddedShape { len: 128, batch: 8 });
        assert_eq!(d.padded_shape(10, 3), PaddedShape { len: 10, batch: 3 });
        assert_eq!(d.padded_shape(10, 3).tokens(), 30);
    }
}
