//! Models from the Hugging Face hub: a repository id at a revision (a branch, tag or commit;
//! `main` by default), downloaded through `hf-hub` into `MORPH_HOME/hub`. The hub's own
//! environment is honoured: `HF_TOKEN` (else the token `huggingface-cli login` cached) for
//! gated and private repositories, `HF_ENDPOINT` for a mirror.

use std::path::Path;

use hf_hub::api::sync::{ApiBuilder, ApiError, ApiRepo};
use hf_hub::{Repo, RepoType};

use crate::files::{FetchError, ModelFiles, POOLING_CONFIG, PROMPTS_CONFIG, REQUIRED, SENTENCE_CONFIGS};

/// The revision a hub model is read at unless one is named.
const MAIN: &str = "main";

/// A hub repository at a revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubModel {
    pub id: String,
    pub revision: String,
}

impl HubModel {
    pub fn new(id: impl Into<String>) -> Self {
        Self { id: id.into(), revision: MAIN.into() }
    }

    /// Its name where a model is named: the id, and the revision unless it is `main`.
    pub fn name(&self) -> String {
        match self.revision.as_str() {
            MAIN => self.id.clone(),
            rev => format!("{}@{rev}", self.id),
        }
    }
}

/// The hub token: `HF_TOKEN` if set and not empty (else `hf-hub` reads the cached login).
fn token_from_env() -> Option<String> {
    std::env::var("HF_TOKEN").ok().filter(|t| !t.trim().is_empty())
}

/// The hub repository of `model` at its revision, read through the hub's environment and
/// cached in `home/hub`.
pub(crate) fn api(model: &HubModel, home: &Path) -> Result<ApiRepo, FetchError> {
    let hub_err = |e: ApiError| FetchError::Hub { id: model.name(), detail: e.to_string() };
    let mut builder = ApiBuilder::from_env().with_cache_dir(home.join("hub")).with_progress(false);
    if let Some(token) = token_from_env() {
        builder = builder.with_token(Some(token));
    }
    let api = builder.build().map_err(hub_err)?;
    Ok(api.repo(Repo::with_revision(model.id.clone(), RepoType::Model, model.revision.clone())))
}

/// Downloads (or finds cached) the model's files at its revision.
pub(crate) fn fetch_hub(model: &HubModel, home: &Path) -> Result<ModelFiles, FetchError> {
    let hub_err = |e: ApiError| FetchError::Hub { id: model.name(), detail: e.to_string() };
    let repo = api(model, home)?;
    let mut dir = None;
    for file in REQUIRED {
        let path = repo.get(file).map_err(hub_err)?;
        dir = path.parent().map(Path::to_path_buf);
    }
    // Optional: without it the pooling defaults to mean.
    let _ = repo.get(POOLING_CONFIG);
    // Optional: without one the longest input is the longest runtime's. The names are tried in
    // TEI's order, each a request (as TEI makes them), and the first found counts.
    let _ = SENTENCE_CONFIGS.iter().find(|name| repo.get(name).is_ok());
    // Optional: without it the model has no prompts.
    let _ = repo.get(PROMPTS_CONFIG);
    let dir = dir.ok_or_else(|| FetchError::Hub { id: model.name(), detail: "no files".into() })?;
    ModelFiles::in_dir(model.name(), dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_revision_other_than_main_is_part_of_the_name() {
        assert_eq!(HubModel::new("org/name").name(), "org/name");
        let pinned = HubModel { revision: "v1.0".into(), ..HubModel::new("org/name") };
        assert_eq!(pinned.name(), "org/name@v1.0");
    }
}
