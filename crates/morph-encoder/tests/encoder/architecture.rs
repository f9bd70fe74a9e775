//! A checkpoint of an architecture Morph's encoder does not compute is refused at load, naming
//! its model_type, rather than loaded to compute silently wrong vectors; the default model's
//! config passes.

use morph_encoder::architecture::BertConfig;
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
    config["model_type"] = "deberta-v2".into();
    let path = dir.path().join("config.json");
    std::fs::write(&path, config.to_string()).expect("writing config.json");
    let deberta = ModelFiles { config: path, ..files };
    match Checkpoint::config(&deberta) {
        Err(EngineError::Load(message)) => {
            assert!(message.contains("model_type \"deberta-v2\" is not supported"), "{message}")
        }
        other => panic!("a DeBERTa config was accepted: {other:?}"),
    }
    // Its own ONNX export stays the way out: the sizes are read whatever the architecture.
    assert!(BertConfig::read(&deberta).is_ok());
}
