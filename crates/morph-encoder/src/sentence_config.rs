//! sentence-transformers' config of a model (`sentence_bert_config.json` or its kin): the
//! longest input the model is served.

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
    let bad = |detail: String| EngineError::Load(format!("{}: {detail}", path.display()));
    let text = std::fs::read_to_string(&path).map_err(|e| bad(e.to_string()))?;
    let config: SentenceConfig = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    match config.max_seq_length {
        Some(0) => Err(bad("max_seq_length is 0: no input fits".into())),
        length => Ok(length),
    }
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
    fn a_config_that_does_not_parse_or_fits_nothing_is_refused_by_path() {
        let (_d, files) = files_with(Some(r#"{"max_seq_length": "long"}"#));
        let err = max_seq_length(&files).unwrap_err().to_string();
        assert!(err.contains("sentence_bert_config.json"), "{err}");
        let (_d, files) = files_with(Some(r#"{"max_seq_length": 0}"#));
        let err = max_seq_length(&files).unwrap_err().to_string();
        assert!(err.contains("max_seq_length is 0"), "{err}");
    }
}
