//! sentence-transformers' configs of a model: the longest input it is served
//! (`sentence_bert_config.json` or its kin) and its prompts (`config_sentence_transformers.json`).

use std::collections::BTreeMap;
use std::path::Path;

use morph_engine::EngineError;
use morph_fetch::ModelFiles;
use serde::Deserialize;

/// The one field Morph reads; sentence-transformers also writes `do_lower_case`, which the
/// tokenizer already does.
#[derive(Deserialize)]
struct SentenceConfig {
    #[serde(default)]
    max_seq_length: Option<u32>,
}

/// The model's `max_seq_length`: sentence-transformers cuts every input there, and TEI refuses
/// (or, asked to, cuts) a longer one, so a vector served past it would differ from theirs.
/// `None` where the model has no such config or it names no length.
pub fn max_seq_length(files: &ModelFiles) -> Result<Option<u32>, EngineError> {
    let Some(path) = files.sentence_config() else { return Ok(None) };
    let config: SentenceConfig = read(&path)?;
    match config.max_seq_length {
        Some(0) => Err(load_error(&path, "max_seq_length is 0: no input fits")),
        length => Ok(length),
    }
}

/// The prompts a model was trained with: each one's name and the text put before an input
/// (`"query"` → `"query: "`), and the one sentence-transformers puts before every input that
/// names none (`default_prompt_name`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Prompts {
    #[serde(default, deserialize_with = "null_as_none")]
    pub prompts: BTreeMap<String, String>,
    #[serde(default)]
    pub default_prompt_name: Option<String>,
}

/// `prompts: null` (as some configs write it) as no prompts.
fn null_as_none<'de, D: serde::Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
    Ok(Option::<BTreeMap<String, String>>::deserialize(d)?.unwrap_or_default())
}

/// The model's prompts: none where it has no `config_sentence_transformers.json` or that
/// names none.
pub fn prompts(files: &ModelFiles) -> Result<Prompts, EngineError> {
    match files.prompts_config() {
        Some(path) => read(&path),
        None => Ok(Prompts::default()),
    }
}

fn read<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, EngineError> {
    let text = std::fs::read_to_string(path).map_err(|e| load_error(path, e))?;
    serde_json::from_str(&text).map_err(|e| load_error(path, e))
}

fn load_error(path: &Path, detail: impl std::fmt::Display) -> EngineError {
    EngineError::Load(format!("{}: {detail}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files_with(config: Option<&str>) -> (tempfile::TempDir, ModelFiles) {
        let dir = tempfile::tempdir().unwrap();
        if let Some(text) = config {
            std::fs::write(dir.path().join("sentence_bert_config.json"), text).unwrap();
        }
        let path = |name: &str| dir.path().join(name);
        let files = ModelFiles {
            name: "m".into(),
            dir: dir.path().into(),
            config: path("config.json"),
            weights: path("model.safetensors"),
            tokenizer: path("tokenizer.json"),
        };
        (dir, files)
    }

    #[test]
    fn reads_max_seq_length_and_nothing_where_there_is_none() {
        let (_d, files) = files_with(Some(r#"{"max_seq_length": 256, "do_lower_case": false}"#));
        assert_eq!(max_seq_length(&files).unwrap(), Some(256));
        let (_d, files) = files_with(Some(r#"{"do_lower_case": false}"#));
        assert_eq!(max_seq_length(&files).unwrap(), None);
        let (_d, files) = files_with(None);
        assert_eq!(max_seq_length(&files).unwrap(), None);
    }

    #[test]
    fn reads_the_prompts_and_none_where_there_are_none() {
        let (dir, files) = files_with(None);
        assert_eq!(prompts(&files).unwrap(), Prompts::default());
        let config = r#"{"prompts": {"query": "query: ", "passage": "passage: "}, "default_prompt_name": null, "similarity_fn_name": "cosine"}"#;
        std::fs::write(dir.path().join("config_sentence_transformers.json"), config).unwrap();
        let read = prompts(&files).unwrap();
        assert_eq!(read.prompts["query"], "query: ");
        assert_eq!((read.prompts.len(), read.default_prompt_name), (2, None));
        let null = r#"{"prompts": null, "default_prompt_name": null}"#;
        std::fs::write(dir.path().join("config_sentence_transformers.json"), null).unwrap();
        assert_eq!(prompts(&files).unwrap(), Prompts::default());
        std::fs::write(dir.path().join("config_sentence_transformers.json"), r#"{"prompts": 3}"#).unwrap();
        let err = prompts(&files).unwrap_err().to_string();
        assert!(err.contains("config_sentence_transformers.json"), "{err}");
    }

    #[test]
    fn a_config_that_does_not_parse_or_fits_nothing_is_refused_by_path() {
        let (_d, files) = files_with(Some(r#"{"max_seq_length": "long"}"#));
        let err = max_seq_length(&files).unwrap_err().to_string();
        assert!(err.contains("sentence_bert_config.json"), "{err}");
        let (_d, files) = files_with(Some(r#"{"max_seq_length": 0}"#));
        let err = max_seq_length(&files).unwrap_err().to_string();
        assert!(err.contains("max_seq_length is 0"), "{err}");
    }
}
