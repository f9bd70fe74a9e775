//! Where a generation server's predicted output lengths (SSJF) come from.

use std::path::PathBuf;
use std::str::FromStr;

use anyhow::Context;
use morph_backend::EngineKind;
use morph_encoder::predictor::model::TUNED_ENCODER;
use morph_fetch::{ModelSource, fetch, morph_home};
use morph_policy::registry::PolicyKind;
use morph_server::prediction::PredictorConfig;
use morph_train::predictor::dataset::{load_length_records, load_sharegpt, sharegpt_examples};

/// The predictor asked for (`--predictor`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PredictorChoice {
    /// The built-in predictor where the policy needs predictions (ssjf), none otherwise.
    Auto,
    /// No predictions: ssjf orders by max_tokens.
    None,
    /// The head trained on SmolLM2-135M-Instruct's own output lengths, over all-MiniLM-L6-v2.
    Builtin,
    /// The true lengths `morph train lengths` recorded for these ShareGPT conversations: the
    /// oracle SJF baseline of experiments.
    Oracle { lengths: Option<PathBuf>, sharegpt: Option<PathBuf> },
    /// A directory `morph train predictor --out DIR` wrote (with its encoder, if it tuned one).
    Trained(PathBuf),
}

impl FromStr for PredictorChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Self::Auto),
            "none" => Ok(Self::None),
            "builtin" => Ok(Self::Builtin),
            "oracle" => Ok(Self::Oracle { lengths: None, sharegpt: None }),
            dir if PathBuf::from(dir).is_dir() => Ok(Self::Trained(dir.into())),
            other => Err(format!(
                "{other}: expected auto, none, builtin, oracle or a directory with head.safetensors and predictor.json"
            )),
        }
    }
}

impl PredictorChoice {
    /// Whether a server with `policy` runs this predictor's encoder (on `--engine`).
    pub fn runs_encoder(&self, policy: &PolicyKind) -> bool {
        match self {
            Self::Auto => policy.needs.predictions,
            Self::Builtin | Self::Trained(_) => true,
            Self::None | Self::Oracle { .. } => false,
        }
    }

    /// The predictor for a server with `policy`, its encoder run on `engine`.
    pub fn resolve(
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
        match self {
            Self::Auto if policy.needs.predictions => model(None),
            Self::Auto | Self::None => Ok(PredictorConfig::None),
            Self::Builtin => model(None),
            Self::Oracle { lengths: Some(lengths), sharegpt: Some(sharegpt) } => {
                let examples = sharegpt_examples(&load_sharegpt(sharegpt)?, &load_length_records(lengths)?)?;
                Ok(PredictorConfig::Oracle(examples.into_iter().map(|e| (e.prompt, e.output_len)).collect()))
            }
            Self::Oracle { .. } => {
                anyhow::bail!("--predictor oracle needs --oracle-lengths FILE and --sharegpt FILE")
            }
            Self::Trained(dir) => model(Some(dir.clone())),
        }
    }
}
