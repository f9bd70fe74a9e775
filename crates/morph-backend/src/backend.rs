//! A loaded backend: the model's weights held once in host memory (the host-memory parameter
//! cache), and the engines of any unit built from them.

use std::sync::Arc;

use morph_core::{LatencyProfile, ModelId, RuntimeSpec, StageSpec, TokenPlan, UnitKind, UnitSpec};
use morph_decoder::{DecoderModel, DecoderStage, LoadedDecoder, load_decoder};
use morph_encoder::{CandleRuntime, Encoder, OrtEncoder, Pooling};
use morph_engine::{EmulatedRuntime, Engine, EngineError};
use morph_fetch::ModelFiles;

use crate::{EngineKind, NO_STAGES_OF_ONNX_FILE, NO_STAGES_ON_CANDLE};

/// The loaded model and how its engines compute. Candle instances share its weights, ONNX
/// Runtime instances are compiled from them.
#[derive(Debug)]
pub enum Backend {
    Candle(Arc<Encoder>),
    /// The encoder (its checkpoint, boxed: it is the largest variant) and the token plans
    /// every instance compiles.
    Ort(Box<OrtEncoder>, Vec<TokenPlan>),
    Emulated {
        profile: Arc<LatencyProfile>,
        dim: usize,
    },
    /// The decoder (its shape and tokenizer; its weights too on candle), what runs its
    /// generations' steps, and how its steps run.
    Decoder(LoadedDecoder, DecoderSteps),
}

/// How a decoder's steps run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecoderSteps {
    /// The most prompt tokens a generation feeds per iteration (0: all).
    pub prefill_chunk: usize,
    /// The threads of a step that feeds more than one token (`None`: its instance's threads).
    pub batch_threads: Option<u16>,
}

impl Backend {
    /// Loads `kind`'s backend: an encoder from `files` pooled by `pooling`, emulated
    /// instances, or a decoder from its GGUF file (`files` unused).
    pub fn load(files: &ModelFiles, pooling: Pooling, kind: &EngineKind) -> Result<Self, EngineError> {
        Ok(match kind {
            EngineKind::Candle => Backend::Candle(Arc::new(Encoder::load(files, pooling)?)),
            EngineKind::Ort { library, onnx, plans, dtype } => {
                let encoder = match onnx {
                    None => OrtEncoder::load(files, pooling, library)?,
                    Some(onnx) => OrtEncoder::load_file(files, onnx, pooling, library)?,
                }
                .with_dtype(*dtype)?;
                let mut plans = plans.clone();
                plans.push(TokenPlan::Plain);
                plans.sort_unstable();
                plans.dedup();
                Backend::Ort(Box::new(encoder), plans)
            }
            EngineKind::Emulated { profile, dim } => Self::emulated(profile.clone(), *dim),
            EngineKind::Decoder { .. } => Self::from_gguf(kind)?,
        })
    }

    /// Loads a decoder engine's backend from its GGUF file (no other kind loads without files).
    pub fn from_gguf(kind: &EngineKind) -> Result<Self, EngineError> {
        let EngineKind::Decoder { gguf, prefill_chunk, batch_threads, kernels, chat_template, prompt_cache } =
            kind
        else {
            return Err(EngineError::Load(format!("the {} engine is not a decoder", kind.label())));
        };
        let decoder = load_decoder(gguf, *kernels, chat_template.as_deref(), *prompt_cache)?;
        let steps = DecoderSteps { prefill_chunk: *prefill_chunk, batch_threads: *batch_threads };
        Ok(Backend::Decoder(decoder, steps))
    }

    /// Emulated instances that sleep for `profile`'s latency.
    pub fn emulated(profile: Arc<LatencyProfile>, dim: usize) -> Self {
        Backend::Emulated { profile, dim }
    }

    /// Output dimension of every instance.
    pub fn dim(&self) -> usize {
        match self {
            Backend::Candle(encoder) => encoder.dim(),
            Backend::Ort(encoder, _) => encoder.dim(),
            Backend::Emulated { dim, .. } => *dim,
            Backend::Decoder(decoder, _) => decoder.model.llama.config.hidden,
        }
    }

    /// The decoder and its tokenizer, when this backend generates.
    pub fn decoder_model(&self) -> Option<&Arc<DecoderModel>> {
        self.decoder().map(|decoder| &decoder.model)
    }

    /// The decoder as loaded, when this backend generates.
    pub fn decoder(&self) -> Option<&LoadedDecoder> {
        match self {
            Backend::Decoder(decoder, _) => Some(decoder),
            _ => None,
        }
    }

    /// The unit an instance of `runtime` runs: a whole decoder or encoder, as this serves.
    pub fn unit(&self, runtime: RuntimeSpec) -> UnitSpec {
        match self {
            Backend::Decoder(..) => UnitSpec::generation(runtime),
            _ => UnitSpec::batch(runtime),
        }
    }

    /// The units of the model cut into `count` pipeline stages of consecutive layers, as even
    /// as the layer count allows (emulated instances: one nominal layer per stage).
    pub fn stage_units(&self, runtime: RuntimeSpec, count: u16) -> Result<Vec<UnitSpec>, EngineError> {
        let layers = match self {
            Backend::Ort(encoder, _) => {
                encoder.layers().ok_or_else(|| EngineError::Unsupported(NO_STAGES_OF_ONNX_FILE.into()))?
            }
            Backend::Emulated { .. } => usize::from(count),
            // A decoder's stages run its prefill only.
            Backend::Decoder(decoder, _) => decoder.model.llama.config.layers,
            Backend::Candle(_) => {
                return Err(EngineError::Unsupported(NO_STAGES_ON_CANDLE.into()));
            }
        };
        if count == 0 || usize::from(count) > layers {
            return Err(EngineError::Unsupported(format!("{count} stages of a {layers}-layer model")));
        }
        let stage = |k| StageSpec::even(ModelId(0), k, count, layers as u16);
        Ok((0..count).map(|k| UnitSpec::batch(runtime).with_stage(stage(k))).collect())
    }

    /// One engine instance of an encoder `unit` (a whole model, a pipeline stage, or a
    /// decoder's prefill), not yet on a thread.
    pub fn engine(&self, unit: UnitSpec) -> Result<Box<dyn Engine>, EngineError> {
        let spec = unit.runtime;
        Ok(match self {
            Backend::Candle(_) if unit.stage.is_some() => {
                return Err(EngineError::Unsupported(NO_STAGES_ON_CANDLE.into()));
            }
            Backend::Candle(encoder) => Box::new(CandleRuntime::new(encoder.clone(), spec)?),
            Backend::Ort(encoder, plans) => Box::new(encoder.instance(unit, plans)?),
            Backend::Emulated { profile, dim } => Box::new(EmulatedRuntime::new(profile.clone(), unit, *dim)),
            Backend::Decoder(..) if unit.kind == UnitKind::Generation => {
                return Err(EngineError::Load("a decoder runs generations, not encoder batches".into()));
            }
            // An encoder unit of a decoder is a prefill: of a stage, or (no stage) of the whole.
            Backend::Decoder(decoder, _) => {
                Box::new(DecoderStage::new(decoder.model.clone(), spec, unit.stage))
            }
        })
    }
}
