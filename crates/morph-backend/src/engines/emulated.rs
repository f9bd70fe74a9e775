//! Emulated instances: each batch sleeps for the latency a profile gives; vectors are
//! placeholders.

use std::sync::Arc;

use morph_core::{LatencyProfile, UnitSpec};
use morph_engine::{EmulatedRuntime, Engine, EngineError};

use crate::{EngineCan, EngineConfig, LoadedModel, ModelInput};

/// Instances taking their latency from `profile`, answering vectors of `dim`. Nothing to load:
/// the settings are the model.
#[derive(Debug, Clone)]
pub struct EmulatedEngine {
    pub profile: Arc<LatencyProfile>,
    pub dim: usize,
}

impl EngineConfig for EmulatedEngine {
    fn label(&self) -> &'static str {
        "emulated"
    }

    fn can(&self) -> EngineCan {
        EngineCan { stages: Ok(()), processes: false }
    }

    fn computes_the_model(&self) -> bool {
        false
    }

    fn load_model(&self, _model: ModelInput) -> Result<Box<dyn LoadedModel>, EngineError> {
        Ok(Box::new(self.clone()))
    }
}

impl LoadedModel for EmulatedEngine {
    fn dim(&self) -> usize {
        self.dim
    }

    fn layers(&self, stages: u16) -> Result<usize, EngineError> {
        Ok(usize::from(stages))
    }

    fn instance(&self, unit: UnitSpec) -> Result<Box<dyn Engine>, EngineError> {
        Ok(Box::new(EmulatedRuntime::new(self.profile.clone(), unit, self.dim)))
    }
}
