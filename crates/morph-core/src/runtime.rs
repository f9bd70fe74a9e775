//! Runtimes: the shapes an engine instance executes batches in.
//!
//! A *fixed* runtime pads every batch to exactly `(max_len, max_batch)` (Arlo's statically
//! compiled runtime). A *dynamic* runtime pads only to the longest sequence in the batch and
//! runs as many rows as it was given (what TEI does on CPU). A fixed runtime may keep a
//! *dynamic fallback* beside it (a second, dynamic-shaped engine on the same instance, run one
//! batch at a time, never concurrently): a batch longer than its shape runs there, at its own
//! length, up to the fallback's length; and so may a batch of the shorter inputs a runtime
//! helps with (`demoted_len`), which would otherwise pay the whole padding of the shape.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::time::Nanos;

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
    /// A fixed runtime's dynamic fallback: the longest sequence it takes past `max_len`, run
    /// dynamic-shaped; 0 without one.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fallback_len: u32,
    /// With a fallback: a batch whose longest input has at most this many tokens runs on the
    /// fallback too, at its own length (inputs of shorter classes, demoted to this runtime,
    /// that pay less there than padded to the shape); 0: none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub demoted_len: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
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

/// An engine's account of a batch it ran: its time on a core, and the shape whose price in a
/// profile (measured on rows of one length each) that work is ([`RuntimeSpec::priced_shape`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Computed {
    pub took: Nanos,
    pub shape: PaddedShape,
}

impl RuntimeSpec {
    pub fn fixed(max_len: u32, max_batch: u32) -> Self {
        Self { kind: ShapeKind::Fixed, max_len, max_batch, fallback_len: 0, demoted_len: 0 }
    }

    pub fn dynamic(max_len: u32, max_batch: u32) -> Self {
        Self { kind: ShapeKind::Dynamic, max_len, max_batch, fallback_len: 0, demoted_len: 0 }
    }

    /// A fixed runtime with a dynamic fallback up to `fallback_len` tokens (a dynamic runtime
    /// already takes every length up to its own; it stays as it is).
    pub fn with_fallback(self, fallback_len: u32) -> Self {
        match self.kind {
            ShapeKind::Fixed if fallback_len > self.max_len => Self { fallback_len, ..self },
            _ => self,
        }
    }

    /// A fixed runtime with a fallback that also runs the batches of at most `demoted_len`
    /// tokens (below its shape; without a fallback it stays as it is).
    pub fn with_demoted(self, demoted_len: u32) -> Self {
        match self.kind {
            ShapeKind::Fixed if self.fallback_len > 0 && demoted_len < self.max_len => {
                Self { demoted_len, ..self }
            }
            _ => self,
        }
    }

    /// The runtime a batch whose longest sequence has `longest` tokens runs on: this one, or
    /// past its shape, or at most `demoted_len` long, its dynamic fallback.
    pub fn running(&self, longest: u32) -> RuntimeSpec {
        if self.fallback_len > 0 && (longest > self.max_len || longest <= self.demoted_len) {
            Self::dynamic(self.fallback_len, self.max_batch)
        } else {
            *self
        }
    }

    /// The padded shape a batch of sequences with these lengths runs at.
    /// `longest` is the longest sequence and `rows` the number of sequences.
    pub fn padded_shape(&self, longest: u32, rows: u32) -> PaddedShape {
        let runtime = self.running(longest);
        match runtime.kind {
            ShapeKind::Fixed => PaddedShape { len: runtime.max_len, batch: runtime.max_batch },
            ShapeKind::Dynamic => PaddedShape { len: longest, batch: rows },
        }
    }

    /// The shape a profile prices a batch of rows of `lens` tokens at: its padded shape, or
    /// where the engine computes only the rows' real tokens (`packed`), its rows at their mean
    /// length, rounded up (the profile measured rows of one length; a packed batch of shorter
    /// rows does less work than its padded shape). The mean prices the work linear in tokens
    /// exactly and a mixed batch's attention, which grows with each row's length squared,
    /// slightly low: short texts' attention is a small share of an encoder's work.
    pub fn priced_shape(&self, lens: &[usize], packed: bool) -> PaddedShape {
        let rows = u32::try_from(lens.len()).unwrap_or(u32::MAX);
        let longest = lens.iter().copied().max().map_or(0, |l| u32::try_from(l).unwrap_or(u32::MAX));
        match packed {
            true if rows > 0 => {
                let total: usize = lens.iter().sum();
                let len = u32::try_from(total.div_ceil(lens.len())).unwrap_or(u32::MAX);
                PaddedShape { len, batch: rows }
            }
            _ => self.padded_shape(longest, rows),
        }
    }

    /// The longest sequence it takes, its fallback's included.
    pub fn longest_taken(&self) -> u32 {
        self.max_len.max(self.fallback_len)
    }

    pub fn fits(&self, len: u32) -> bool {
        len <= self.longest_taken()
    }
}

impl fmt::Display for RuntimeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            ShapeKind::Fixed => "fixed",
            ShapeKind::Dynamic => "dynamic",
        };
        write!(f, "{kind}:{}x{}", self.max_len, self.max_batch)?;
        if self.fallback_len > 0 {
            write!(f, "+{}", self.fallback_len)?;
        }
        if self.demoted_len > 0 {
            write!(f, "/{}", self.demoted_len)?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "runtime '{0}' is not KIND:MAX_LENxMAX_BATCH[+FALLBACK_LEN[/SHORT_LEN]], e.g. fixed:128x8, dynamic:512x32, fixed:128x8+512 (a fixed shape with a dynamic fallback up to 512 tokens) or fixed:128x8+512/64 (whose fallback also runs the batches of at most 64 tokens)"
)]
pub struct ParseRuntimeError(String);

impl FromStr for RuntimeSpec {
    type Err = ParseRuntimeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseRuntimeError(s.to_string());
        let (kind, dims) = s.split_once(':').ok_or_else(err)?;
        let (len, rest) = dims.split_once('x').ok_or_else(err)?;
        let (batch, fallback, demoted) = match rest.split_once('+') {
            Some((batch, fallback)) => {
                let (fallback, demoted) = match fallback.split_once('/') {
                    Some((fallback, demoted)) => (fallback, demoted.parse::<u32>().map_err(|_| err())?),
                    None => (fallback, 0),
                };
                (batch, Some(fallback.parse::<u32>().map_err(|_| err())?), demoted)
            }
            None => (rest, None, 0),
        };
        let max_len: u32 = len.parse().map_err(|_| err())?;
        let max_batch: u32 = batch.parse().map_err(|_| err())?;
        if max_len == 0 || max_batch == 0 {
            return Err(err());
        }
        match (kind, fallback) {
            ("fixed", None) => Ok(Self::fixed(max_len, max_batch)),
            ("fixed", Some(fallback)) if fallback > max_len && demoted < max_len => {
                Ok(Self::fixed(max_len, max_batch).with_fallback(fallback).with_demoted(demoted))
            }
            ("dynamic", None) => Ok(Self::dynamic(max_len, max_batch)),
            _ => Err(err()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packed_batch_is_priced_at_its_mean_length_a_padded_one_at_its_padded_shape() {
        let lens = [4, 10, 30];
        let dynamic = RuntimeSpec::dynamic(64, 8);
        assert_eq!(dynamic.priced_shape(&lens, false), PaddedShape { len: 30, batch: 3 });
        assert_eq!(
            dynamic.priced_shape(&lens, true),
            PaddedShape { len: 15, batch: 3 },
            "44 tokens / 3 rows"
        );
        let fixed = RuntimeSpec::fixed(64, 8);
        assert_eq!(fixed.priced_shape(&lens, false), PaddedShape { len: 64, batch: 8 });
        assert_eq!(fixed.priced_shape(&lens, true), PaddedShape { len: 15, batch: 3 });
    }

    #[test]
    fn parses_and_prints() {
        let r: RuntimeSpec = "fixed:128x8".parse().unwrap();
        assert_eq!(r, RuntimeSpec::fixed(128, 8));
        assert_eq!(r.to_string(), "fixed:128x8");
        assert!("dynamic:0x8".parse::<RuntimeSpec>().is_err());
        assert!("static:128x8".parse::<RuntimeSpec>().is_err());
        assert!("fixed:128".parse::<RuntimeSpec>().is_err());
        let f: RuntimeSpec = "fixed:128x1+512".parse().unwrap();
        assert_eq!(f, RuntimeSpec::fixed(128, 1).with_fallback(512));
        assert_eq!(f.to_string(), "fixed:128x1+512");
        let d: RuntimeSpec = "fixed:128x1+512/64".parse().unwrap();
        assert_eq!(d, RuntimeSpec::fixed(128, 1).with_fallback(512).with_demoted(64));
        assert_eq!(d.to_string(), "fixed:128x1+512/64");
        for wrong in
            ["fixed:128x1+64", "dynamic:128x1+512", "fixed:128x1+", "fixed:128x1+512/128", "fixed:128x1/64"]
        {
            assert!(wrong.parse::<RuntimeSpec>().is_err(), "{wrong}");
        }
    }

    #[test]
    fn a_fallback_runs_what_its_fixed_shape_cannot_dynamically() {
        let f = RuntimeSpec::fixed(128, 4).with_fallback(512);
        assert!(f.fits(512) && !f.fits(513) && !RuntimeSpec::fixed(128, 4).fits(129));
        assert_eq!(f.padded_shape(100, 2), PaddedShape { len: 128, batch: 4 });
        assert_eq!(f.padded_shape(300, 2), PaddedShape { len: 300, batch: 2 });
        assert_eq!(f.running(300), RuntimeSpec::dynamic(512, 4));
        assert_eq!(f.running(128), f);
        assert_eq!(RuntimeSpec::dynamic(512, 4).with_fallback(1024), RuntimeSpec::dynamic(512, 4));
    }

    #[test]
    fn a_fallback_runs_the_demoted_short_batches_at_their_own_length() {
        let f = RuntimeSpec::fixed(128, 4).with_fallback(512).with_demoted(64);
        assert_eq!(f.padded_shape(64, 2), PaddedShape { len: 64, batch: 2 }, "a shorter class's batch");
        assert_eq!(f.padded_shape(65, 2), PaddedShape { len: 128, batch: 4 }, "its own class pads");
        assert_eq!(f.padded_shape(300, 1), PaddedShape { len: 300, batch: 1 });
        assert_eq!(f.running(10), RuntimeSpec::dynamic(512, 4));
        assert_eq!(RuntimeSpec::fixed(128, 4).with_demoted(64), RuntimeSpec::fixed(128, 4), "no fallback");
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
