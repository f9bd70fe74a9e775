//! `morph train adapt`: its flags; the run is `morph_train::adapt`.

use std::path::PathBuf;

use clap::Args;
use morph_core::TokenPlan;
use morph_train::adapt::{AdaptRun, train_adapt};

use crate::engine_args::EngineArgs;
use crate::model_args::ModelArgs;

#[derive(Debug, Args)]
pub(crate) struct AdaptArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// `--plans` lists the token plans profiled besides the plain model, e.g.
    /// --plans exit:4,exit:5,merge:1,merge:2 (exits after 4 and 5 layers, merging 1 and 2 tokens a layer).
    #[command(flatten)]
    engine: EngineArgs,
    /// The labelled text folder holding sst2/, ag_news/ and sms_spam/, e.g. ../shared/data/text.
    #[arg(long)]
    data: PathBuf,
    /// Longest input in tokens; longer texts are cut (keeping the final [SEP]).
    #[arg(long, default_value_t = 128)]
    max_len: u32,
    /// Most training epochs (training stops earlier when validation accuracy stalls).
    #[arg(long, default_value_t = 50)]
    epochs: usize,
    #[arg(long, default_value_t = 0.002)]
    lr: f64,
    /// Use at most this many examples of each split of each task (a quick run).
    #[arg(long)]
    limit: Option<usize>,
    /// Train a prompt plan's prompts on at most this many training examples per task (a tenth
    /// of them validating): backward passes through the encoder cost ~100× a head's epoch.
    #[arg(long, default_value_t = 2000)]
    prompt_examples: usize,
    /// Most epochs of a prompt plan's training (early stopping after 3 without a better
    /// validation accuracy).
    #[arg(long, default_value_t = 50)]
    prompt_epochs: usize,
    /// Train heads of their own for merging and pruning plans too, on their features (the
    /// spec's per-γ-head ablation; by default they reuse the plain model's heads).
    #[arg(long)]
    own_heads: bool,
    /// Directory for the heads: heads.safetensors and tasks.json.
    #[arg(long)]
    out: PathBuf,
    /// Directory for the profile: accuracy.json and correctness/<task>.jsonl.
    #[arg(long)]
    profile_out: Option<PathBuf>,
}

pub(crate) fn run(mut args: AdaptArgs) -> anyhow::Result<()> {
    let files = args.model.fetch()?;
    let mut plans = vec![TokenPlan::Plain];
    plans.extend(args.engine.plans.iter().copied().filter(|p| *p != TokenPlan::Plain));
    // Prompt plans are trained on candle; ONNX Runtime runs the others.
    args.engine.plans.retain(|p| !matches!(p, TokenPlan::Prompt(..)));
    let engine = args.engine.real()?;
    let run = AdaptRun {
        data: args.data,
        max_len: args.max_len,
        epochs: args.epochs,
        lr: args.lr,
        limit: args.limit,
        prompt_examples: args.prompt_examples,
        prompt_epochs: args.prompt_epochs,
        own_heads: args.own_heads,
        out: args.out,
        profile_out: args.profile_out,
    };
    train_adapt(&files, &engine, &plans, &run)
}
