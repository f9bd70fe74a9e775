//! A BERT-family checkpoint read from disk: `config.json` and every tensor of
//! `model.safetensors`, by name, in BERT's layout whatever its architecture (a classifier's with
//! its token types folded into the vocabulary, [`crate::classifier`]). The candle encoder and the
//! ONNX graph writer both start here.

use std::collections::HashMap;

use candle_core::{Device, Tensor};

use crate::architecture::BertConfig;
use morph_engine::EngineError;
use morph_fetch::ModelFiles;

#[derive(Debug)]
pub struct Checkpoint {
    pub config: BertConfig,
    pub tensors: HashMap<String, Tensor>,
}

impl Checkpoint {
    /// The checkpoint in BERT's layout, whatever architecture of
    /// [`crate::architecture::Architecture`] it is.
    pub fn load(files: &ModelFiles) -> Result<Self, EngineError> {
        let mut config = BertConfig::read(files)?;
        let architecture =
            config.check().map_err(|e| EngineError::Load(format!("{}: {e}", files.config.display())))?;
        let mut tensors = candle_core::safetensors::load(&files.weights, &Device::Cpu)
            .map_err(|e| EngineError::Load(format!("{}: {e}", files.weights.display())))?;
        architecture
            .to_bert(&mut config, &mut tensors)
            .map_err(|e| EngineError::Load(format!("{}: {e}", files.weights.display())))?;
        if crate::classifier::is_classifier(files)? {
            let folded = crate::classifier::fold_token_types(&mut tensors)
                .map_err(|e| EngineError::Load(format!("{}: {e}", files.weights.display())))?;
            config.vocab_size = folded.unwrap_or(config.vocab_size);
        }
        let mut names: Vec<&String> = tensors.keys().collect();
        names.sort();
        for name in names {
            if !finite(&tensors[name])? {
                let at = files.weights.display();
                return Err(EngineError::Load(format!("{at}: tensor {name} holds NaN or infinite values")));
            }
        }
        Ok(Self { config, tensors })
    }

    /// Only the model's `config.json`, checked to be an architecture Morph's graph computes.
    pub fn config(files: &ModelFiles) -> Result<BertConfig, EngineError> {
        let config = BertConfig::read(files)?;
        config.check().map_err(|e| EngineError::Load(format!("{}: {e}", files.config.display())))?;
        Ok(config)
    }

    /// The tensor `name`, or a load error naming it.
    pub fn get(&self, name: &str) -> Result<&Tensor, EngineError> {
        self.tensors
            .get(name)
            .ok_or_else(|| EngineError::Load(format!("the checkpoint has no tensor {name}")))
    }
}

/// Whether every value of `t` is finite (a NaN or infinite weight gives NaN outputs).
fn finite(t: &Tensor) -> Result<bool, EngineError> {
    let values = t.to_dtype(candle_core::DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
    Ok(values.iter().all(|v| v.is_finite()))
}
