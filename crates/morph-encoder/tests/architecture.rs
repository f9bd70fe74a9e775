//! A checkpoint of another architecture than BERT is refused at load, naming its model_type,
//! where it used to load and compute silently wrong vectors (RoBERTa and XLM-R positions,
//! DistilBERT's and MPNet's layers); the default model's config passes.

use morph_encoder::checkpoint::Checkpoint;
use morph_engine::EngineError;
use morph_fetch::{ModelFiles, ModelSource, fetch, morph_home};

#[test]
fn another_model_type_is_refused_by_name_at_load() {
    let files = fetch(&ModelSource::Default, &morph_home()).expect("fetching the default model");
    assert!(Checkpoint::config(&files).is_ok(), "all-MiniLM-L6-v2 is a BERT");
    let dir = tempfile::tempdir().expect("temp dir");
    let text = std::fs::read_to_string(&files.config).expect("config.json");
    let mut config: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    config["model_type"] = "roberta".into();
    let path = dir.path().join("config.json");
    std::fs::write(&path, config.to_string()).expect("writing config.json");
    let roberta = ModelFiles { config: path, ..files };
    match Checkpoint::config(&roberta) {
        Err(EngineError::Load(message)) => {
            assert!(message.contains("model_type \"roberta\" is not supported"), "{message}")
        }
        other => panic!("a RoBERTa config was accepted: {other:?}"),
    }
    // Its own ONNX export stays the way out: the sizes are read whatever the architecture.
    assert!(Checkpoint::sizes(&roberta).is_ok());
}
