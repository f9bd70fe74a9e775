//! A loaded backend: the model's weights held once in host memory (the host-memory parameter
//! cache), and the engines of any unit built from them.

use std::sync::Arc;

use morph_core::{LatencyProfile, ModelId, RuntimeSpec, StageSpec, UnitSpec};
use morph_decoder::{DecoderModel, LoadedDecoder};
use morph_engine::{Engine, EngineError};

use crate::engines::EmulatedEngine;
use crate::{DecoderSteps, LoadedModel};

/// The loaded model of any engine ([`crate::EngineKind::load`]).
#[derive(Debug)]
pub struct Backend(Box<dyn LoadedModel>);

impl Backend {
    pub fn new(loaded: Box<dyn LoadedModel>) -> Self {
        Self(loaded)
    }

    /// Emulated instances that sleep for `profile`'s latency.
    pub fn emulated(profile: Arc<LatencyProfile>, dim: usize) -> Self {
        Self(Box::new(EmulatedEngine { profile, dim }))
    }

    /// Output dimension of every instance.
    pub fn dim(&self) -> usize {
        self.0.dim()
    }

    /// The decoder and its tokenizer, when this backend generates.
    pub fn decoder_model(&self) -> Option<&Arc<DecoderModel>> {
        self.decoder().map(|decoder| &decoder.model)
    }

    /// The decoder as loaded, when this backend generates.
    pub fn decoder(&self) -> Option<&LoadedDecoder> {
        self.0.decoder().map(|(decoder, _)| decoder)
    }

    /// The decoder and how its steps run, when this backend generates.
    pub fn decoder_steps(&self) -> Option<(&LoadedDecoder, DecoderSteps)> {
        self.0.decoder()
    }

    /// The unit an instance of `runtime` runs: a whole decoder or encoder, as this serves.
    pub fn unit(&self, runtime: RuntimeSpec) -> UnitSpec {
        match self.0.decoder() {
            Some(_) => UnitSpec::generation(runtime),
            None => UnitSpec::batch(runtime),
        }
    }

    /// The units of the model cut into `count` pipeline stages of consecutive layers, as even
    /// as the layer count allows.
    pub fn stage_units(&self, runtime: RuntimeSpec, count: u16) -> Result<Vec<UnitSpec>, EngineError> {
        let layers = self.0.layers(count)?;
        if count == 0 || usize::from(count) > layers {
            return Err(EngineError::Unsupported(format!("{count} stages of a {layers}-layer model")));
        }
        let stage = |k| StageSpec::even(ModelId(0), k, count, layers as u16);
        Ok((0..count).map(|k| UnitSpec::batch(runtime).with_stage(stage(k))).collect())
    }

    /// One engine instance of an encoder `unit` (a whole model, a pipeline stage, or a
    /// decoder's prefill), not yet on a thread.
    pub fn engine(&self, unit: UnitSpec) -> Result<Box<dyn Engine>, EngineError> {
        self.0.instance(unit)
    }
}

#[cfg(test)]
mod tests {
    use morph_core::UnitKind;
    use morph_core::fixtures::flat_profile;
    use morph_engine::EmulatedRuntime;

    use super::*;
    use crate::{EngineCan, EngineConfig, EngineKind, ModelInput};

    /// An engine from outside `engines/`: a two-layer model whose instances sleep, to show that
    /// nothing but its two traits is asked of a new engine.
    #[derive(Debug)]
    struct TwoLayers;

    impl EngineConfig for TwoLayers {
        fn label(&self) -> &'static str {
            "two-layers"
        }

        fn can(&self) -> EngineCan {
            EngineCan { stages: Ok(()), processes: false }
        }

        fn load_model(&self, _model: ModelInput) -> Result<Box<dyn LoadedModel>, EngineError> {
            Ok(Box::new(TwoLayers))
        }
    }

    impl LoadedModel for TwoLayers {
        fn dim(&self) -> usize {
            4
        }

        fn layers(&self, _stages: u16) -> Result<usize, EngineError> {
            Ok(2)
        }

        fn instance(&self, unit: UnitSpec) -> Result<Box<dyn Engine>, EngineError> {
            Ok(Box::new(EmulatedRuntime::new(Arc::new(flat_profile(1.0, 1)), unit, self.dim())))
        }
    }

    #[test]
    fn a_new_engine_is_served_through_its_two_traits_alone() {
        let engine = EngineKind::new(TwoLayers);
        assert!(engine.processes_model(None).is_none(), "no worker processes where it cannot run them");
        let backend = engine.load(None).unwrap();
        let runtime = RuntimeSpec::dynamic(64, 4);
        assert_eq!(backend.unit(runtime).kind, UnitKind::Batch, "an encoder's unit: it does not generate");
        assert!(backend.decoder().is_none());
        let stages = backend.stage_units(runtime, 2).unwrap();
        assert_eq!(stages.iter().map(|u| u.stage.unwrap().end_layer).collect::<Vec<_>>(), [1, 2]);
        let too_many = backend.stage_units(runtime, 3).unwrap_err().to_string();
        assert!(too_many.contains("3 stages of a 2-layer model"), "{too_many}");
        assert_eq!(backend.engine(stages[1]).unwrap().dim(), 4);
    }
}
