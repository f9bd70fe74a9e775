//! A model directory with a NaN weight is refused at load, naming the tensor; an engine's NaN
//! output never reaches a caller as a vector.

use std::collections::HashMap;

use morph_encoder::checkpoint::Checkpoint;
use morph_encoder::{Encoder, Pooling};
use morph_engine::EngineError;
use morph_fetch::{ModelFiles, ModelSource};
use morph_fetch::{fetch, morph_home};

#[test]
fn a_nan_weight_is_refused_at_load_naming_its_tensor() {
    let files = fetch(&ModelSource::Default, &morph_home()).expect("fetching the default model");
    let dir = tempfile::tempdir().expect("temp dir");
    let mut tensors: HashMap<String, candle_core::Tensor> =
        candle_core::safetensors::load(&files.weights, &candle_core::Device::Cpu).expect("weights");
    let name = "encoder.layer.3.output.dense.bias";
    let bias = tensors[name].to_vec1::<f32>().expect("a vector");
    let mut poisoned = bias.clone();
    poisoned[7] = f32::NAN;
    tensors
        .insert(name.into(), candle_core::Tensor::new(poisoned, &candle_core::Device::Cpu).expect("tensor"));
    let weights = dir.path().join("model.safetensors");
    candle_core::safetensors::save(&tensors, &weights).expect("saving");
    let poisoned = ModelFiles { weights, ..files.clone() };
    let message = match Checkpoint::load(&poisoned) {
        Err(EngineError::Load(message)) => message,
        other => panic!("a NaN weight was accepted: {:?}", other.map(|_| ())),
    };
    assert!(message.contains(name) && message.contains("NaN or infinite"), "{message}");
    assert!(Encoder::load(&poisoned, Pooling::Mean).is_err());
    assert!(Checkpoint::load(&files).is_ok(), "the real weights are finite");
}
