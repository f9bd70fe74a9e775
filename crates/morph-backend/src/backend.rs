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
