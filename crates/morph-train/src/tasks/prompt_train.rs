//! Training a task's deep prompts (OTAS γ > 0) with its head through the frozen encoder: candle
//! autograd on the prompts `[layers, p, hidden]` and the head, the encoder's weights plain
//! tensors. The paper's batch 32 and learning rate 0.002; the head starts from the plain
//! model's (when given), so training only has to find what the prompts add. Keeps the epoch
//! with the best accuracy on a validation slice of the training split.

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor, Var};
use candle_nn::{VarBuilder, VarMap};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::fit::{KeepBest, TrainConfig, fit};
use morph_core::PromptMode;
use morph_encoder::bert::Kernels;
use morph_encoder::candle_runtime::Encoder;
use morph_encoder::pooling::l2_normalize_rows;
use morph_encoder::tasks::head::{ClassifierHead, Prediction};
use morph_engine::EngineError;

/// Epochs without a better validation accuracy before training stops.
const PATIENCE: usize = 3;
/// Rows per forward pass when only predicting.
const PREDICT_BATCH: usize = 64;

/// Token ids and labels of a split.
pub type Split<'a> = (&'a [Vec<u32>], &'a [u32]);

/// What to train: `p` prompts per layer in `mode`, the head named `prefix`.
#[derive(Debug, Clone)]
pub struct PromptSpec<'a> {
    pub prefix: &'a str,
    pub p: usize,
    pub mode: PromptMode,
    pub classes: usize,
    /// The plain model's head for this task (`prefix`-free names `weight`, `bias`), to start from.
    pub start_head: Option<HashMap<&'static str, Tensor>>,
}

#[derive(Debug)]
pub struct TrainedPrompts {
    /// `[layers, p, hidden]`.
    pub prompts: Tensor,
    /// The head's parameters, named `prefix.weight` and `prefix.bias`.
    pub weights: HashMap<String, Tensor>,
    pub head: ClassifierHead,
    pub losses: Vec<f32>,
    pub val_accuracy: f64,
}

/// Trains `spec`'s prompts and head on `train`, validated on `val`. `encoder` must run candle's
/// own kernels (Morph's have no backward pass).
pub fn train_prompts(
    encoder: &Encoder,
    spec: &PromptSpec<'_>,
    train: Split<'_>,
    val: Split<'_>,
    config: &TrainConfig,
) -> Result<TrainedPrompts, EngineError> {
    if encoder.model().kernels != Kernels::Candle {
        return Err(EngineError::Unsupported("prompt training needs the encoder on candle's kernels".into()));
    }
    let cfg = &encoder.model().config;
    let (layers, h) = (cfg.num_hidden_layers, cfg.hidden_size);
    // VPT's Xavier-uniform bound for a [p, hidden] prompt, drawn from the config's seed.
    let bound = (6.0 / (spec.p + h) as f32).sqrt();
    let mut rng = StdRng::seed_from_u64(config.seed);
    let values: Vec<f32> = (0..layers * spec.p * h).map(|_| rng.random_range(-bound..bound)).collect();
    let prompts = Var::from_tensor(&Tensor::from_vec(values, (layers, spec.p, h), &Device::Cpu)?)?;
    let mut vars = VarMap::new();
    vars.data().lock().expect("the parameters").insert("prompts".into(), prompts.clone());
    let head = ClassifierHead::new(
        VarBuilder::from_varmap(&vars, DType::F32, &Device::Cpu).pp(spec.prefix),
        h,
        spec.classes,
    )?;
    for (name, value) in spec.start_head.iter().flatten() {
        vars.set_one(format!("{}.{name}", spec.prefix), value)?;
    }
    let targets = Tensor::new(train.1, &Device::Cpu)?;
    let loss = |rows: &Tensor, chunk: &[u32]| {
        let ids: Vec<Vec<u32>> = chunk.iter().map(|&i| train.0[i as usize].clone()).collect();
        let x = pooled(encoder, &ids, prompts.as_tensor(), spec.mode).map_err(candle_core::Error::wrap)?;
        candle_nn::loss::cross_entropy(&head.logits(&x)?, &targets.index_select(rows, 0)?)
    };
    let mut best = KeepBest::new(&vars, PATIENCE)?;
    let after_epoch =
        |_| best.observe(&vars, accuracy(&predict(encoder, &head, &prompts, spec.mode, val.0)?, val.1));
    let losses = fit(&vars, train.1.len(), config, loss, after_epoch)?;
    best.restore(&vars)?;
    let mut weights = best.weights;
    let prompts = weights.remove("prompts").ok_or_else(|| EngineError::Inference("no prompts".into()))?;
    Ok(TrainedPrompts { prompts, weights, head, losses, val_accuracy: best.best })
}

/// Pooled, normalised vectors of `ids` (padded to their longest) under `prompts`.
fn pooled(
    encoder: &Encoder,
    ids: &[Vec<u32>],
    prompts: &Tensor,
    mode: PromptMode,
) -> Result<Tensor, EngineError> {
    let len = ids.iter().map(Vec::len).max().unwrap_or(1);
    let x = encoder.pooled_prompted(ids, len, &prompts.unsqueeze(0)?, mode)?;
    Ok(l2_normalize_rows(&x)?)
}

/// The head's predictions for `ids` under `prompts` (no gradient), in order.
pub fn predict(
    encoder: &Encoder,
    head: &ClassifierHead,
    prompts: &Tensor,
    mode: PromptMode,
    ids: &[Vec<u32>],
) -> Result<Vec<Prediction>, EngineError> {
    let prompts = prompts.detach();
    let mut order: Vec<usize> = (0..ids.len()).collect();
    order.sort_by_key(|&i| ids[i].len());
    let mut out: Vec<Option<Prediction>> = vec![None; ids.len()];
    for chunk in order.chunks(PREDICT_BATCH) {
        let rows: Vec<Vec<u32>> = chunk.iter().map(|&i| ids[i].clone()).collect();
        for (&i, p) in chunk.iter().zip(head.predict(&pooled(encoder, &rows, &prompts, mode)?)?) {
            out[i] = Some(p);
        }
    }
    Ok(out.into_iter().flatten().collect())
}

/// The fraction of `predicted` that match `labels`.
pub fn accuracy(predicted: &[Prediction], labels: &[u32]) -> f64 {
    let right = predicted.iter().zip(labels).filter(|(p, l)| p.label == **l as usize).count();
    right as f64 / labels.len().max(1) as f64
}
