//! The candle encoder on the CPU: every instance shares one copy of the weights.

use std::sync::Arc;

use morph_core::UnitSpec;
use morph_encoder::{CandleRuntime, Encoder};
use morph_engine::{Engine, EngineError};

use crate::{EngineCan, EngineConfig, LoadedModel, ModelInput};

/// Why candle's encoder cannot be cut into pipeline stages.
pub const NO_STAGES_ON_CANDLE: &str =
    "pipeline stages need --engine ort (or emulated, or a decoder's prefill)";

/// The candle encoder (fp32), in threads of the server only.
#[derive(Debug, Clone, Copy)]
pub struct CandleEngine;

impl EngineConfig for CandleEngine {
    fn label(&self) -> &'static str {
        "candle"
    }

    fn can(&self) -> EngineCan {
        EngineCan { stages: Err(NO_STAGES_ON_CANDLE), processes: false }
    }

    fn load_model(&self, model: ModelInput) -> Result<Box<dyn LoadedModel>, EngineError> {
        let (files, pooling) = super::encoder_files(model, self.label())?;
        Ok(Box::new(CandleModel(Arc::new(Encoder::load(files, pooling)?))))
    }
}

#[derive(Debug)]
struct CandleModel(Arc<Encoder>);

impl LoadedModel for CandleModel {
    fn dim(&self) -> usize {
        self.0.dim()
    }

    fn layers(&self, _stages: u16) -> Result<usize, EngineError> {
        Err(EngineError::Unsupported(NO_STAGES_ON_CANDLE.into()))
    }

    fn instance(&self, unit: UnitSpec) -> Result<Box<dyn Engine>, EngineError> {
        if unit.stage.is_some() {
            return Err(EngineError::Unsupported(NO_STAGES_ON_CANDLE.into()));
        }
        Ok(Box::new(CandleRuntime::new(self.0.clone(), unit.runtime)?))
    }
}
