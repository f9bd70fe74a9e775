//! `morph train adapt`'s prompt plans (OTAS γ > 0): per task, deep prompts and a head trained
//! together through the frozen encoder (candle autograd, the encoder on candle's kernels),
//! starting from the plain model's head; accuracy measured on the encoder with Morph's
//! kernels, which computes what the ONNX session serving the plan computes.

use std::collections::{BTreeMap, HashMap};

use crate::TrainConfig;
use crate::tasks::{
    prompt_train::PromptSpec, prompt_train::accuracy, prompt_train::predict, prompt_train::train_prompts,
};
use candle_core::Tensor;
use morph_core::PromptMode;
use morph_core::TokenPlan;
use morph_encoder::bert::Kernels;
use morph_encoder::tasks::prompts::prompt_name;
use morph_encoder::tasks::served::HeadTraining;
use morph_encoder::{Encoder, Pooling};
use morph_fetch::ModelFiles;

use super::task::{Encoded, Measured};

/// The encoder twice: on candle's kernels to train through, on Morph's to measure.
pub(super) struct PromptEncoders {
    train: Encoder,
    measure: Encoder,
}

impl PromptEncoders {
    pub(super) fn load(files: &ModelFiles, pooling: Pooling) -> anyhow::Result<Self> {
        Ok(Self {
            train: Encoder::load_with(files, pooling, Kernels::Candle)?,
            measure: Encoder::load_with(files, pooling, Kernels::Morph)?,
        })
    }
}

/// What training one task's prompts wrote and measured.
pub(super) struct PromptRun {
    pub measured: Measured,
    pub epochs: usize,
}

/// Trains task `t`'s `p` prompts per layer in `mode` (plan `plan`) on at most `examples`
/// training examples (a tenth of them validating); adds the head to `weights`, the prompts to
/// `prompts` and a line to `meta`.
#[allow(clippy::too_many_arguments)]
pub(super) fn train_task(
    encoders: &PromptEncoders,
    (plan, p, mode): (TokenPlan, usize, PromptMode),
    t: &Encoded,
    examples: usize,
    config: &TrainConfig,
    weights: &mut HashMap<String, Tensor>,
    prompts: &mut HashMap<String, Tensor>,
    meta: &mut BTreeMap<String, HeadTraining>,
) -> anyhow::Result<PromptRun> {
    let name = t.task.name();
    let plain = format!("{name}.0");
    let start_head = ["weight", "bias"]
        .into_iter()
        .map(|part| weights.get(&format!("{plain}.{part}")).map(|w| (part, w.clone())))
        .collect::<Option<HashMap<_, _>>>();
    let prefix = format!("{name}.{plan}");
    let n = t.train.1.len().min(examples);
    let n_val = (n / 10).max(1);
    let spec = PromptSpec { prefix: &prefix, p, mode, classes: t.task.classes().len(), start_head };
    let fit = (&t.train.0[n_val..n], &t.train.1[n_val..n]);
    let val = (&t.train.0[..n_val], &t.train.1[..n_val]);
    let trained = train_prompts(&encoders.train, &spec, fit, val, config)?;
    let measure = |ids: &[Vec<u32>]| predict(&encoders.measure, &trained.head, &trained.prompts, mode, ids);
    let profiling = accuracy(&measure(&t.profiling.0)?, &t.profiling.1);
    let predicted = measure(&t.test.0)?;
    let correct: Vec<bool> = predicted.iter().zip(&t.test.1).map(|(p, &l)| p.label == l as usize).collect();
    let test = correct.iter().filter(|&&c| c).count() as f64 / correct.len().max(1) as f64;
    let epochs = trained.losses.len();
    meta.insert(
        prefix,
        HeadTraining {
            epochs,
            val_accuracy: trained.val_accuracy,
            train_examples: Some(n - n_val),
            losses: Some(trained.losses),
        },
    );
    weights.extend(trained.weights);
    prompts.insert(prompt_name(name, plan), trained.prompts);
    Ok(PromptRun { measured: Measured { profiling, test, correct }, epochs })
}
