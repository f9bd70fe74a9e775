//! One file per engine, each its [`crate::EngineConfig`] (the settings it is chosen with) and
//! its [`crate::LoadedModel`].

mod candle;
mod decoder;
mod emulated;
mod ort;

pub use candle::{CandleEngine, NO_STAGES_ON_CANDLE};
pub use decoder::DecoderEngine;
pub use emulated::EmulatedEngine;
pub use ort::{NO_STAGES_OF_ONNX_FILE, OrtEngine};

use morph_engine::EngineError;
use morph_fetch::ModelFiles;

use crate::ModelInput;

/// An encoder engine's files and pooling, or the error of an encoder asked to load without them.
fn encoder_files<'a>(
    model: ModelInput<'a>,
    engine: &str,
) -> Result<(&'a ModelFiles, morph_core::Pooling), EngineError> {
    model.ok_or_else(|| EngineError::Load(format!("the {engine} engine needs the encoder's files")))
}
