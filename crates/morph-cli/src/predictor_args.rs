//! `--predictor`: where a generation server's predicted output lengths (SSJF) come from.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use morph_backend::EngineKind;
use morph_encoder::predictor::model::TUNED_ENCODER;
use morph_fetch::ModelSource;
use morph_fetch::{fetch, morph_home};
use morph_policy::registry::PolicyKind;
use morph_server::prediction::PredictorConfig;
use morph_train::predictor::{
    dataset::load_length_records, dataset::load_sharegpt, dataset::sharegpt_examples,
};

#[derive(Debug, Args)]
pub(crate) struct PredictorArgs {
    /// Generation: where the scheduler's predicted output lengths come from. `auto`: the
    /// built-in predictor with --policy ssjf, none otherwise; `none`: ssjf orders by max_tokens;
    /// `builtin`: the head trained on SmolLM2-135M-Instruct's own output lengths, over
    /// all-MiniLM-L6-v2 (fetched) on --engine; a directory written by `morph train predictor
    /// --out DIR` (with its encoder, if it tuned one); `oracle`: the true lengths recorded by
    /// `morph train lengths` (--oracle-lengths with --sharegpt), the oracle SJF baseline for
    /// experiments.
    #[arg(long, default_value = "auto")]
    predictor: String,
    /// With --predictor oracle: the recorded lengths (e.g. assets/datasets/smollm2_llamacpp_heldout_lengths.jsonl,
    /// the served llama.cpp path's answers to the rounds `morph bench --endpoint chat` sends).
    #[arg(long)]
    oracle_lengths: Option<PathBuf>,
    /// With --predictor oracle: the ShareGPT conversations those lengths answer.
    #[arg(long)]
    sharegpt: Option<PathBuf>,
}

impl PredictorArgs {
    /// The predictor for a server with `policy`, its encoder run on `engine`.
    pub(crate) fn config(
        &self,
        policy: &PolicyKind,
        engine: impl FnOnce() -> anyhow::Result<EngineKind>,
    ) -> anyhow::Result<PredictorConfig> {
        let model = |head: Option<PathBuf>| -> anyhow::Result<PredictorConfig> {
            // A head trained with the encoder's top layers carries that encoder.
            let source = match head.as_ref().map(|dir| dir.join(TUNED_ENCODER)).filter(|dir| dir.is_dir()) {
                Some(tuned) => ModelSource::Local(tuned),
                None => ModelSource::Default,
            };
            let encoder = fetch(&source, &morph_home()).context("fetching the predictor's encoder")?;
            Ok(PredictorConfig::Model { encoder, engine: engine()?, head })
        };
        match self.predictor.as_str() {
            "auto" if policy.needs.predictions => model(None),
            "auto" | "none" => Ok(PredictorConfig::None),
            "builtin" => model(None),
            "oracle" => {
                let (Some(lengths), Some(sharegpt)) = (&self.oracle_lengths, &self.sharegpt) else {
                    anyhow::bail!("--predictor oracle needs --oracle-lengths FILE and --sharegpt FILE");
                };
                let examples = sharegpt_examples(&load_sharegpt(sharegpt)?, &load_length_records(lengths)?)?;
                Ok(PredictorConfig::Oracle(examples.into_iter().map(|e| (e.prompt, e.output_len)).collect()))
            }
            dir if PathBuf::from(dir).is_dir() => model(Some(dir.into())),
            other => anyhow::bail!(
                "--predictor {other}: expected auto, none, builtin, oracle or a directory with head.safetensors and predictor.json"
            ),
        }
    }
}
