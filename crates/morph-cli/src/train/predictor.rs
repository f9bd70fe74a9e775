//! `morph train predictor`: its flags; the run is `morph_train::predictor_run`.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use morph_encoder::predictor::Objective;
use morph_train::predictor_run::{PredictorRun, train_predictor};

use crate::engine_args::EngineArgs;
use crate::model_args::ModelArgs;

#[derive(Debug, Args)]
pub(crate) struct PredictorArgs {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    engine: EngineArgs,
    /// Prompts with output lengths, in the LMSYS trace form (JSONL: SynthesizedBody,
    /// GeneratedTokens, RequestID), e.g. ../shared/data/traces/lmsys_llama_05.jsonl; repeatable.
    #[arg(long)]
    data: Vec<PathBuf>,
    /// Output lengths of the served decoder recorded by `morph train lengths`, e.g.
    /// assets/datasets/smollm2_sharegpt_lengths.jsonl (needs --sharegpt for the prompts' text).
    #[arg(long)]
    lengths: Option<PathBuf>,
    /// The ShareGPT conversations --lengths was recorded from.
    #[arg(long)]
    sharegpt: Option<PathBuf>,
    /// Score on this file's test-split rounds instead (lengths recorded like --lengths, e.g. by
    /// another decoder path: how well a head trained on one path's answers predicts another's).
    #[arg(long)]
    test_lengths: Option<PathBuf>,
    /// Objectives to train (comma separated); the first is written to --out.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "regression-l1,regression-mse,classification,ordinal,binary"
    )]
    objectives: Vec<String>,
    /// ReLU units in the head's hidden layer; 0 makes the head one linear layer. On SmolLM2's
    /// own lengths a linear head ranked the test rounds better (Spearman 0.37 against 0.32 for
    /// 128 units at lr 1e-3; 128 units at lr 1e-2 overfit, 0.28).
    #[arg(long, default_value_t = 0)]
    hidden: usize,
    #[arg(long, default_value_t = 40)]
    epochs: usize,
    /// AdamW's learning rate (1e-2 suits the linear head; 1e-3 a hidden layer of 128).
    #[arg(long, default_value_t = 1e-2)]
    lr: f64,
    /// Fine-tune the encoder's top K layers with the first objective's head (after the head
    /// alone is fitted to the frozen encoder); 0 keeps the encoder frozen. The tuned encoder is
    /// written to --out DIR/encoder and served with the head (`--predictor DIR`).
    #[arg(long, default_value_t = 0)]
    tune_layers: usize,
    /// Epochs of fine-tuning the top layers with the head.
    #[arg(long, default_value_t = 4)]
    tune_epochs: usize,
    /// AdamW's learning rate while fine-tuning (the pretrained layers move little).
    #[arg(long, default_value_t = 1e-4)]
    tune_lr: f64,
    /// Directory for the trained head (head.safetensors, predictor.json; encoder/ with
    /// --tune-layers).
    #[arg(long)]
    out: Option<PathBuf>,
    /// JSONL file for the test split: source, conversation, round, input_len, output_len and
    /// each objective's prediction (what `morph simulate`'s recorded predictor replays).
    #[arg(long)]
    predictions: Option<PathBuf>,
}

pub(crate) fn run(args: PredictorArgs) -> anyhow::Result<()> {
    let objectives = args
        .objectives
        .iter()
        .map(|o| serde_json::from_value::<Objective>(serde_json::Value::String(o.clone())))
        .collect::<Result<Vec<_>, _>>()
        .context("--objectives: each is regression-l1, regression-mse, classification, ordinal or binary")?;
    let files = args.model.fetch()?;
    let engine = args.engine.real()?;
    let run = PredictorRun {
        data: args.data,
        lengths: args.lengths,
        sharegpt: args.sharegpt,
        test_lengths: args.test_lengths,
        objectives,
        hidden: args.hidden,
        epochs: args.epochs,
        lr: args.lr,
        tune_layers: args.tune_layers,
        tune_epochs: args.tune_epochs,
        tune_lr: args.tune_lr,
        out: args.out,
        predictions: args.predictions,
    };
    train_predictor(&files, &engine, &run)
}
