//! SSJF's proxy model head (§3.1): a linear layer on a frozen encoder's pooled vector, or a
//! two-layer MLP (a hidden layer of `hidden` ReLU units), with the paper's objectives: regression of the output length with L1 (the default) or MSE loss,
//! 5-class classification over percentile buckets with cross-entropy, ordinal classification
//! (four "longer than bucket k" logits with binary cross-entropy), and binary (short or long,
//! split at the median length).

use candle_core::{D, DType, Device, Tensor};
use candle_nn::{Linear, Module, VarBuilder, VarMap, linear};
use serde::{Deserialize, Serialize};

use morph_engine::EngineError;

/// Width of the hidden layer of heads saved before the width was recorded.
const SAVED_HIDDEN: usize = 128;
/// Regression targets are output lengths divided by this (keeps the loss near 1).
const LENGTH_SCALE: f64 = 100.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Objective {
    RegressionL1,
    RegressionMse,
    Classification,
    Ordinal,
    Binary,
}

impl Objective {
    pub const ALL: [Objective; 5] = [
        Objective::RegressionL1,
        Objective::RegressionMse,
        Objective::Classification,
        Objective::Ordinal,
        Objective::Binary,
    ];

    fn outputs(self) -> usize {
        match self {
            Objective::RegressionL1 | Objective::RegressionMse | Objective::Binary => 1,
            Objective::Classification => 5,
            Objective::Ordinal => 4,
        }
    }
}

/// The length buckets: four boundaries (the 20th…80th percentiles of the training lengths), a
/// representative length per bucket (its middle, the 10th…90th percentiles) used to turn a
/// class into a length, the median length (the binary split), and the longest (no regression
/// predicts past it: the answers it learned from stopped there, at the recording's cap).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Buckets {
    pub bounds: [u32; 4],
    pub medians: [u32; 5],
    pub median: u32,
    #[serde(default = "no_longest")]
    pub longest: u32,
}

fn no_longest() -> u32 {
    u32::MAX
}

impl Buckets {
    pub fn from_lengths(lengths: &[u32]) -> Self {
        let mut sorted = lengths.to_vec();
        sorted.sort_unstable();
        let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize];
        let bounds = [at(0.2), at(0.4), at(0.6), at(0.8)];
        let medians = [at(0.1), at(0.3), at(0.5), at(0.7), at(0.9)];
        Self { bounds, medians, median: at(0.5), longest: sorted.last().copied().unwrap_or(u32::MAX) }
    }

    /// The bucket of a length: how many boundaries it exceeds.
    pub fn of(&self, len: u32) -> usize {
        self.bounds.iter().filter(|&&b| len > b).count()
    }
}

/// Mean binary cross-entropy of logits `z` against 0/1 targets `y`, in the form that stays
/// finite for large |z|: max(z, 0) − z·y + log(1 + e^−|z|).
fn bce_with_logits(z: &Tensor, y: &Tensor) -> candle_core::Result<Tensor> {
    let softplus = (z.abs()?.neg()?.exp()? + 1.0)?.log()?;
    ((z.relu()? - (z * y)?)? + softplus)?.mean_all()
}

/// The head and what it was trained for.
#[derive(Debug)]
pub struct LengthHead {
    /// The hidden layer; none for a linear head.
    hidden: Option<Linear>,
    out: Linear,
    pub objective: Objective,
    pub buckets: Buckets,
}

/// How good a length predictor is on the test split, as SSJF's Table 2 reports it (scored by
/// `morph-train`): accuracy and macro F1 over the five buckets, the mean absolute error in
/// tokens, and how well the predictions order the requests.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Scores {
    pub accuracy: f64,
    pub macro_f1: f64,
    pub mae_tokens: f64,
    /// Spearman's ρ between predicted and true lengths (0 where either is constant).
    #[serde(default)]
    pub spearman: f64,
}

/// What a saved head says of itself (`predictor.json` beside `head.safetensors`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeadMeta {
    pub objective: Objective,
    pub buckets: Buckets,
    /// The frozen encoder whose pooled, normalised vectors it reads.
    pub encoder: String,
    /// Width of those vectors.
    pub dim: usize,
    /// ReLU units in the hidden layer; 0 for a linear head.
    #[serde(default = "saved_hidden")]
    pub hidden: usize,
    /// Its scores on the test split.
    pub scores: Scores,
    /// ln(predicted / true) on the test split: mean and standard deviation (the simulator's
    /// lognormal error model).
    pub error_mu: f64,
    pub error_sigma: f64,
}

fn saved_hidden() -> usize {
    SAVED_HIDDEN
}

impl LengthHead {
    /// A freshly initialised head (`hidden` ReLU units, 0 for linear) whose parameters live in
    /// `vars`.
    pub fn new(
        vars: &VarMap,
        dim: usize,
        hidden: usize,
        objective: Objective,
        buckets: Buckets,
    ) -> Result<Self, EngineError> {
        Self::build(VarBuilder::from_varmap(vars, DType::F32, &Device::Cpu), dim, hidden, objective, buckets)
    }

    /// A trained head from its saved weights (safetensors bytes) and description.
    pub fn from_saved(weights: &[u8], meta: &HeadMeta) -> Result<Self, EngineError> {
        let vb = VarBuilder::from_slice_safetensors(weights, DType::F32, &Device::Cpu)?;
        Self::build(vb, meta.dim, meta.hidden, meta.objective, meta.buckets.clone())
    }

    fn build(
        vb: VarBuilder,
        dim: usize,
        hidden: usize,
        objective: Objective,
        buckets: Buckets,
    ) -> Result<Self, EngineError> {
        let (hidden, out_in) = match hidden {
            0 => (None, dim),
            units => (Some(linear(dim, units, vb.pp("hidden"))?), units),
        };
        Ok(Self { hidden, out: linear(out_in, objective.outputs(), vb.pp("out"))?, objective, buckets })
    }

    /// Raw outputs `[n, outputs]` for pooled vectors `[n, dim]`.
    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        match &self.hidden {
            Some(hidden) => self.out.forward(&hidden.forward(x)?.relu()?),
            None => self.out.forward(x),
        }
    }

    /// The training loss of `outputs` against true lengths.
    pub fn loss(&self, outputs: &Tensor, lengths: &[u32]) -> candle_core::Result<Tensor> {
        let device = outputs.device();
        let n = lengths.len();
        match self.objective {
            Objective::RegressionL1 | Objective::RegressionMse => {
                let target: Vec<f32> =
                    lengths.iter().map(|&l| (f64::from(l) / LENGTH_SCALE) as f32).collect();
                let diff = (outputs.squeeze(1)? - Tensor::from_vec(target, n, device)?)?;
                match self.objective {
                    Objective::RegressionL1 => diff.abs()?.mean_all(),
                    _ => diff.sqr()?.mean_all(),
                }
            }
            Objective::Classification => {
                let classes: Vec<u32> = lengths.iter().map(|&l| self.buckets.of(l) as u32).collect();
                candle_nn::loss::cross_entropy(outputs, &Tensor::from_vec(classes, n, device)?)
            }
            Objective::Ordinal => {
                let above: Vec<f32> = lengths
                    .iter()
                    .flat_map(|&l| (0..4).map(move |k| if self.buckets.of(l) > k { 1.0 } else { 0.0 }))
                    .collect();
                bce_with_logits(outputs, &Tensor::from_vec(above, (n, 4), device)?)
            }
            Objective::Binary => {
                let long: Vec<f32> =
                    lengths.iter().map(|&l| if l > self.buckets.median { 1.0 } else { 0.0 }).collect();
                bce_with_logits(outputs, &Tensor::from_vec(long, (n, 1), device)?)
            }
        }
    }

    /// Predicted output lengths for pooled vectors `[n, dim]`.
    pub fn predict(&self, x: &Tensor) -> Result<Vec<u32>, EngineError> {
        let out = self.forward(x)?;
        let median = |bucket: usize| self.buckets.medians[bucket.min(4)];
        Ok(match self.objective {
            Objective::RegressionL1 | Objective::RegressionMse => out
                .squeeze(1)?
                .to_vec1::<f32>()?
                .into_iter()
                .map(|v| ((f64::from(v) * LENGTH_SCALE).round().max(1.0) as u32).min(self.buckets.longest))
                .collect(),
            Objective::Classification => {
                out.argmax(D::Minus1)?.to_vec1::<u32>()?.into_iter().map(|c| median(c as usize)).collect()
            }
            Objective::Ordinal => out
                .to_vec2::<f32>()?
                .into_iter()
                .map(|logits| median(logits.iter().filter(|&&z| z > 0.0).count()))
                .collect(),
            // Short: the 30th percentile; long: the 70th.
            Objective::Binary => out
                .squeeze(1)?
                .to_vec1::<f32>()?
                .into_iter()
                .map(|z| if z > 0.0 { median(3) } else { median(1) })
                .collect(),
        })
    }
}
