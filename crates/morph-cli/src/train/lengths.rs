//! `morph train lengths`: its flags; the run is `morph_train::lengths`.

use std::path::PathBuf;

use clap::Args;
use morph_decoder::{DecoderKernels, PrefillWeights, PromptCacheConfig, load_decoder};
use morph_train::lengths::{LengthsRun, record_lengths};
use morph_train::predictor::dataset::Rounds;

use crate::model_args::ModelArgs;
use crate::rounds_arg;

#[derive(Debug, Args)]
pub(crate) struct LengthsArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// ShareGPT conversations (JSONL: id, turns), e.g. ../shared/data/conversations/sharegpt.jsonl.
    #[arg(long)]
    sharegpt: PathBuf,
    /// How many conversations to answer, in file order.
    #[arg(long, default_value_t = 800)]
    conversations: usize,
    /// Conversations to pass over first (several runs can share a file's conversations out).
    #[arg(long, default_value_t = 0)]
    skip: usize,
    /// Which of those conversations to answer: all, only the held-out ones (validation and
    /// test splits), which is what `morph bench --endpoint chat` sends by default, or only the
    /// training split.
    #[arg(long, default_value = "all", value_parser = rounds_arg::rounds())]
    rounds: Rounds,
    /// Prompts are cut to this many decoder tokens by dropping their oldest turns; a round
    /// whose own prompt is longer is skipped.
    #[arg(long, default_value_t = 1024)]
    max_context: usize,
    /// Answers are cut at this many tokens (recorded with finish "length").
    #[arg(long, default_value_t = 512)]
    max_tokens: u32,
    /// Generations running at once.
    #[arg(long, default_value_t = 16)]
    batch: usize,
    /// What runs the decoder's steps: llama-cpp (the GGUF weights as shipped, as `morph serve
    /// --task generate` runs them) or candle (f32).
    #[arg(long, default_value = "llama-cpp", value_parser = clap::value_parser!(DecoderKernels))]
    decoder_kernels: DecoderKernels,
    /// What llama.cpp prefills prompts on (as `morph serve --prefill-weights`). `file` by default:
    /// the recordings in assets/datasets were made so, and an oracle's lengths are the true ones
    /// only for a server prefilling the same way (experiments/ssjf_live.sh serves with `file`).
    #[arg(long, default_value = "file", value_parser = clap::value_parser!(PrefillWeights))]
    prefill_weights: PrefillWeights,
    /// JSONL file the lengths are appended to (conversations already in it are skipped).
    #[arg(long)]
    out: PathBuf,
}

pub(crate) fn run(args: LengthsArgs) -> anyhow::Result<()> {
    let decoder = load_decoder(
        &args.model.fetch_decoder()?,
        args.decoder_kernels,
        None,
        PromptCacheConfig::OFF,
        args.prefill_weights,
    )?;
    let run = LengthsRun {
        sharegpt: args.sharegpt,
        conversations: args.conversations,
        skip: args.skip,
        rounds: args.rounds,
        max_context: args.max_context,
        max_tokens: args.max_tokens,
        batch: args.batch,
        out: args.out,
    };
    record_lengths(&decoder, &run)
}
