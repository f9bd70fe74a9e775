//! Pooling of hidden states into one vector per sequence, and L2 normalisation.

use std::path::Path;

use candle_core::{D, Result, Tensor};
use serde::{Deserialize, Serialize};

use crate::bert::masked_sum;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Pooling {
    /// Mean of the real (unmasked) tokens: sentence-transformers' default.
    #[default]
    Mean,
    /// The first token (`[CLS]`).
    Cls,
}

impl std::str::FromStr for Pooling {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "mean" => Ok(Pooling::Mean),
            "cls" => Ok(Pooling::Cls),
            other => Err(format!("pooling '{other}' is not one of: mean, cls")),
        }
    }
}

impl std::fmt::Display for Pooling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Pooling::Mean => "mean",
            Pooling::Cls => "cls",
        })
    }
}

#[derive(Deserialize)]
struct SentenceTransformersPooling {
    #[serde(default)]
    pooling_mode_cls_token: bool,
}

impl Pooling {
    /// Reads sentence-transformers' `1_Pooling/config.json`; mean pooling if it is absent.
    pub fn from_model_dir(dir: &Path) -> Self {
        let path = dir.join("1_Pooling").join("config.json");
        std::fs::read_to_string(path)
            .ok()
            .and_then(|t| serde_json::from_str::<SentenceTransformersPooling>(&t).ok())
            .map_or(Pooling::Mean, |c| if c.pooling_mode_cls_token { Pooling::Cls } else { Pooling::Mean })
    }

    /// `hidden`: `[batch, len, hidden]`, `mask`: `[batch, len]` → `[batch, hidden]`.
    pub fn apply(self, hidden: &Tensor, mask: &Tensor) -> Result<Tensor> {
        match self {
            Pooling::Cls => hidden.narrow(1, 0, 1)?.squeeze(1),
            Pooling::Mean => {
                let counts = mask.to_dtype(hidden.dtype())?.sum_keepdim(D::Minus1)?.clamp(1.0, f64::MAX)?;
                masked_sum(hidden, mask)?.broadcast_div(&counts)
            }
        }
    }

    /// One sequence's hidden states, `len × dim` floats row by row, with its 1/0 `mask` →
    /// the pooled vector (the same as [`Pooling::apply`], on plain slices).
    pub fn apply_rows(self, hidden: &[f32], mask: &[i64], dim: usize) -> Vec<f32> {
        match self {
            Pooling::Cls => hidden[..dim].to_vec(),
            Pooling::Mean => {
                let mut sum = vec![0f32; dim];
                for (row, _) in hidden.chunks_exact(dim).zip(mask).filter(|(_, m)| **m != 0) {
                    sum.iter_mut().zip(row).for_each(|(s, x)| *s += x);
                }
                let count = mask.iter().filter(|m| **m != 0).count().max(1) as f32;
                sum.iter_mut().for_each(|s| *s /= count);
                sum
            }
        }
    }
}

/// Scales `v` to unit L2 norm in place; a zero vector is left as it is.
pub fn l2_normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// Each row of `x` `[n, dim]` scaled to unit L2 norm, in tensor ops (differentiable).
pub fn l2_normalize_rows(x: &Tensor) -> Result<Tensor> {
    let norm = x.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
    x.broadcast_div(&norm)
}

pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (na * nb).max(f32::MIN_POSITIVE)
}

#[cfg(test)]
mod tests {
    use candle_core::Device;

    use super::*;

    #[test]
    fn mean_ignores_padding_and_cls_takes_the_first_token() {
        let hidden = Tensor::new(&[[[1f32, 2.], [3., 4.], [100., 100.]]], &Device::Cpu).unwrap();
        let mask = Tensor::new(&[[1u32, 1, 0]], &Device::Cpu).unwrap();
        let mean = Pooling::Mean.apply(&hidden, &mask).unwrap().to_vec2::<f32>().unwrap();
        assert_eq!(mean, vec![vec![2., 3.]]);
        let cls = Pooling::Cls.apply(&hidden, &mask).unwrap().to_vec2::<f32>().unwrap();
        assert_eq!(cls, vec![vec![1., 2.]]);
        let rows = [1f32, 2., 3., 4., 100., 100.];
        assert_eq!(Pooling::Mean.apply_rows(&rows, &[1, 1, 0], 2), vec![2., 3.]);
        assert_eq!(Pooling::Cls.apply_rows(&rows, &[1, 1, 0], 2), vec![1., 2.]);
    }

    #[test]
    fn normalizes_to_unit_length() {
        let mut v = vec![3.0, 4.0];
        l2_normalize(&mut v);
        assert_eq!(v, vec![0.6, 0.8]);
        let mut zero = vec![0.0; 3];
        l2_normalize(&mut zero);
        assert_eq!(zero, vec![0.0; 3]);
        assert!((cosine(&[1.0, 0.0], &[1.0, 1.0]) - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6);
    }
}
