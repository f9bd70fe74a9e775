//! Pooling of hidden states into one vector per sequence, and L2 normalisation.

use std::path::Path;

use candle_core::{D, Result, Tensor};
use serde::Deserialize;

use crate::bert::masked_sum;
pub use morph_core::Pooling;
use morph_engine::EngineError;

/// sentence-transformers' `1_Pooling/config.json`: one mode set.
#[derive(Deserialize)]
struct SentenceTransformersPooling {
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pooling_mode_lasttoken: bool,
    #[serde(default)]
    pooling_mode_max_tokens: bool,
    #[serde(default)]
    pooling_mode_mean_sqrt_len_tokens: bool,
    #[serde(default)]
    pooling_mode_weightedmean_tokens: bool,
    /// Whether a prompt's tokens are pooled with the text's (sentence-transformers' default).
    #[serde(default = "pooled")]
    include_prompt: bool,
}

fn pooled() -> bool {
    true
}

/// The model's `1_Pooling/config.json` (`None` where it has none), and an error naming it.
fn pooling_config(
    dir: &Path,
) -> std::result::Result<Option<(SentenceTransformersPooling, impl Fn(String) -> EngineError)>, EngineError> {
    let path = dir.join("1_Pooling").join("config.json");
    let Ok(text) = std::fs::read_to_string(&path) else { return Ok(None) };
    let bad = move |detail: String| EngineError::Load(format!("{}: {detail}", path.display()));
    let config = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    Ok(Some((config, bad)))
}

/// Whether the model pools a prompt's tokens with its text's (`include_prompt`, true where its
/// pooling config does not say).
pub fn pools_prompt(dir: &Path) -> std::result::Result<bool, EngineError> {
    Ok(pooling_config(dir)?.is_none_or(|(config, _)| config.include_prompt))
}

/// Reads sentence-transformers' `1_Pooling/config.json`; mean pooling if it is absent. A
/// mode Morph does not pool by (max, mean·√len, weighted mean, or several at once) is
/// refused by name rather than replaced by another.
pub fn model_pooling(dir: &Path) -> std::result::Result<Pooling, EngineError> {
    let Some((c, bad)) = pooling_config(dir)? else { return Ok(Pooling::Mean) };
    let modes = [
        (c.pooling_mode_mean_tokens, "pooling_mode_mean_tokens", Some(Pooling::Mean)),
        (c.pooling_mode_cls_token, "pooling_mode_cls_token", Some(Pooling::Cls)),
        (c.pooling_mode_lasttoken, "pooling_mode_lasttoken", Some(Pooling::Last)),
        (c.pooling_mode_max_tokens, "pooling_mode_max_tokens", None),
        (c.pooling_mode_mean_sqrt_len_tokens, "pooling_mode_mean_sqrt_len_tokens", None),
        (c.pooling_mode_weightedmean_tokens, "pooling_mode_weightedmean_tokens", None),
    ];
    let set: Vec<_> = modes.iter().filter(|(on, ..)| *on).collect();
    match set.as_slice() {
        [] => Ok(Pooling::Mean),
        [(_, _, Some(pooling))] => Ok(*pooling),
        [(_, name, None)] => {
            Err(bad(format!("{name} is not supported (Morph pools by mean, cls or last token)")))
        }
        several => {
            let names: Vec<&str> = several.iter().map(|(_, name, _)| *name).collect();
            Err(bad(format!("{} are set together; Morph pools by one mode", names.join(", "))))
        }
    }
}

/// `given` (a `--pooling` flag) if set, else what the model at `dir` says ([`model_pooling`]).
pub fn given_or_model_pooling(
    given: Option<Pooling>,
    dir: &Path,
) -> std::result::Result<Pooling, EngineError> {
    given.map_or_else(|| model_pooling(dir), Ok)
}

/// What a [`Pooling`] does to hidden states.
pub trait Pool {
    /// `hidden`: `[batch, len, hidden]`, `mask`: `[batch, len]` → `[batch, hidden]`.
    fn apply(self, hidden: &Tensor, mask: &Tensor) -> Result<Tensor>;

    /// One sequence's hidden states, `len × dim` floats row by row, with its 1/0 `mask` →
    /// the pooled vector (the same as [`Pool::apply`], on plain slices).
    fn apply_rows(self, hidden: &[f32], mask: &[i64], dim: usize) -> Vec<f32>;
}

impl Pool for Pooling {
    fn apply(self, hidden: &Tensor, mask: &Tensor) -> Result<Tensor> {
        match self {
            Pooling::Cls => hidden.narrow(1, 0, 1)?.squeeze(1),
            Pooling::Last => masked_sum(hidden, &last_token(mask)?),
            Pooling::Mean => {
                let counts = mask.to_dtype(hidden.dtype())?.sum_keepdim(D::Minus1)?.clamp(1.0, f64::MAX)?;
                masked_sum(hidden, mask)?.broadcast_div(&counts)
            }
        }
    }

    fn apply_rows(self, hidden: &[f32], mask: &[i64], dim: usize) -> Vec<f32> {
        match self {
            Pooling::Cls => hidden[..dim].to_vec(),
            Pooling::Last => {
                let last = mask.iter().rposition(|m| *m != 0).unwrap_or(0);
                hidden[last * dim..(last + 1) * dim].to_vec()
            }
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

/// 1 at each row's last real token of a right-padded `mask` `[batch, len]`, else 0: the mask
/// less itself shifted left by one.
fn last_token(mask: &Tensor) -> Result<Tensor> {
    let real = mask.to_dtype(candle_core::DType::F32)?.clamp(0.0, 1.0)?;
    let len = real.dim(1)?;
    let next = Tensor::cat(&[real.narrow(1, 1, len - 1)?, real.narrow(1, 0, 1)?.zeros_like()?], 1)?;
    real - next
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
        let last = Pooling::Last.apply(&hidden, &mask).unwrap().to_vec2::<f32>().unwrap();
        assert_eq!(last, vec![vec![3., 4.]]);
        assert_eq!(Pooling::Last.apply_rows(&rows, &[1, 1, 0], 2), vec![3., 4.]);
    }

    #[test]
    fn sentence_transformers_modes_are_read_and_the_unsupported_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(model_pooling(dir.path()).unwrap(), Pooling::Mean, "no config: mean");
        std::fs::create_dir(dir.path().join("1_Pooling")).unwrap();
        let write = |json: &str| std::fs::write(dir.path().join("1_Pooling/config.json"), json).unwrap();
        write(r#"{"word_embedding_dimension": 8, "pooling_mode_lasttoken": true}"#);
        assert_eq!(model_pooling(dir.path()).unwrap(), Pooling::Last);
        write(r#"{"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false}"#);
        assert_eq!(model_pooling(dir.path()).unwrap(), Pooling::Cls);
        write(r#"{"pooling_mode_max_tokens": true}"#);
        let err = model_pooling(dir.path()).unwrap_err().to_string();
        assert!(err.contains("pooling_mode_max_tokens is not supported"), "{err}");
        write(r#"{"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": true}"#);
        let err = model_pooling(dir.path()).unwrap_err().to_string();
        assert!(err.contains("set together"), "{err}");
    }

    #[test]
    fn a_prompt_is_pooled_unless_the_config_says_not() {
        let dir = tempfile::tempdir().unwrap();
        assert!(pools_prompt(dir.path()).unwrap(), "no config");
        std::fs::create_dir(dir.path().join("1_Pooling")).unwrap();
        let write = |json: &str| std::fs::write(dir.path().join("1_Pooling/config.json"), json).unwrap();
        write(r#"{"pooling_mode_mean_tokens": true}"#);
        assert!(pools_prompt(dir.path()).unwrap());
        write(r#"{"pooling_mode_mean_tokens": true, "include_prompt": false}"#);
        assert!(!pools_prompt(dir.path()).unwrap());
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
