//! `--predictor`: where a generation server's predicted output lengths (SSJF) come from.

use std::path::PathBuf;

use clap::Args;
use morph_deploy::PredictorChoice;

#[derive(Debug, Args)]
pub(crate) struct PredictorArgs {
    /// Generation: where the scheduler's predicted output lengths come from. `auto`: the
    /// built-in predictor with --policy ssjf, none otherwise; `none`: ssjf orders by max_tokens;
    /// `builtin`: the head trained on SmolLM2-135M-Instruct's own output lengths, over
    /// all-MiniLM-L6-v2 (fetched) on --engine; a directory written by `morph train predictor
    /// --out DIR` (with its encoder, if it tuned one); `oracle`: the true lengths recorded by
    /// `morph train lengths` (--oracle-lengths with --sharegpt), the oracle SJF baseline for
    /// experiments.
    #[arg(long, default_value = "auto", value_parser = clap::value_parser!(PredictorChoice))]
    predictor: PredictorChoice,
    /// With --predictor oracle: the recorded lengths (e.g. assets/datasets/smollm2_llamacpp_heldout_lengths.jsonl,
    /// the served llama.cpp path's answers to the rounds `morph bench --endpoint chat` sends).
    #[arg(long)]
    oracle_lengths: Option<PathBuf>,
    /// With --predictor oracle: the ShareGPT conversations those lengths answer.
    #[arg(long)]
    sharegpt: Option<PathBuf>,
}

impl PredictorArgs {
    pub(crate) fn choice(&self) -> PredictorChoice {
        match &self.predictor {
            PredictorChoice::Oracle { .. } => PredictorChoice::Oracle {
                lengths: self.oracle_lengths.clone(),
                sharegpt: self.sharegpt.clone(),
            },
            other => other.clone(),
        }
    }
}
