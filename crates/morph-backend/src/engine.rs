//! What every engine is: one [`EngineConfig`] as chosen (its settings, what it can do, how it
//! loads) and one [`LoadedModel`] as loaded (the weights held once, an instance per unit). Each
//! engine implements both in its own file of `engines/`.

use std::any::Any;
use std::fmt::Debug;
use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;

use morph_core::{Pooling, UnitSpec};
use morph_decoder::LoadedDecoder;
use morph_engine::{Engine, EngineError};
use morph_fetch::ModelFiles;
use morph_worker::host::WorkerModel;

use crate::Backend;

/// An encoder's files and the pooling its last layer is read with; `None` for the engines that
/// load without them (a decoder's GGUF holds everything, emulated instances hold nothing).
pub type ModelInput<'a> = Option<(&'a ModelFiles, Pooling)>;

/// An engine as chosen: its settings, what it can do, and how it loads.
pub trait EngineConfig: Debug + Send + Sync + Any {
    /// Its name in profiles' file names, logs and `/info` (`onnxruntime-int8`, `candle`, ...).
    fn label(&self) -> &'static str;

    /// What the model computes in, as TEI's `/info` names it (`model_dtype`).
    fn model_dtype(&self) -> &'static str {
        "float32"
    }

    /// The fingerprint of the code that writes and runs this engine's graph, which a cached
    /// latency profile must share to be reused; `None` for the engines that run no such graph.
    fn graph_fingerprint(&self) -> Option<&'static str> {
        None
    }

    /// What it can do besides whole-model instances in threads of the server.
    fn can(&self) -> EngineCan;

    /// Whether it generates (a decoder LM) rather than computing encoder batches.
    fn generates(&self) -> bool {
        false
    }

    /// Whether its vectors are the model's, computed from its files (emulated instances only
    /// sleep a profile's latency): where they are, the model's own longest input holds.
    fn computes_the_model(&self) -> bool {
        true
    }

    /// The model's name, where the settings hold the model (a decoder's GGUF file); an encoder's
    /// comes with its files.
    fn model_name(&self) -> Option<String> {
        None
    }

    /// Loads the model once, from `model` where the engine reads an encoder's files.
    fn load_model(&self, model: ModelInput) -> Result<Box<dyn LoadedModel>, EngineError>;

    /// What a `morph worker` process loads to run this engine's units (asked only where
    /// [`EngineCan::processes`]).
    fn worker_model(&self, _model: ModelInput) -> Option<WorkerModel> {
        None
    }
}

/// What an engine can do besides whole-model instances in threads of the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineCan {
    /// Cut the model into pipeline stages of consecutive layers, or why it cannot.
    pub stages: Result<(), &'static str>,
    /// Run its instances (a decoder: its prefill stages) as `morph worker` processes.
    pub processes: bool,
}

/// A model loaded once (the host-memory parameter cache): every instance is built from it.
pub trait LoadedModel: Debug + Send + Sync {
    /// Output dimension of every instance.
    fn dim(&self) -> usize;

    /// The layers a pipeline of `stages` stages is cut from, or why this model cannot be cut
    /// (emulated instances: one nominal layer per stage).
    fn layers(&self, stages: u16) -> Result<usize, EngineError>;

    /// One engine instance of an encoder `unit` (a whole model, a pipeline stage, or a
    /// decoder's prefill), not yet on a thread.
    fn instance(&self, unit: UnitSpec) -> Result<Box<dyn Engine>, EngineError>;

    /// The decoder and how its steps run, when this model generates.
    fn decoder(&self) -> Option<(&LoadedDecoder, DecoderSteps)> {
        None
    }
}

/// How a `morph worker` process starts its unit: warm from the prepared artefact in `prepared`,
/// or cold, keeping the artefact it prepares in `prepare` if given.
#[derive(Debug, Clone, Copy)]
pub struct WorkerStart<'a> {
    pub unit: UnitSpec,
    pub prepared: Option<&'a Path>,
    pub prepare: Option<&'a Path>,
}

/// How a decoder's steps run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecoderSteps {
    /// The most prompt tokens a generation feeds per iteration (0: all).
    pub prefill_chunk: usize,
    /// The threads of a step that feeds more than one token (`None`: its instance's threads).
    pub batch_threads: Option<u16>,
}

/// The engine chosen for a deployment (`--engine`, or a decoder for `--task generate`): any
/// [`EngineConfig`], shared.
#[derive(Debug, Clone)]
pub struct EngineKind(Arc<dyn EngineConfig>);

impl EngineKind {
    pub fn new(config: impl EngineConfig) -> Self {
        Self(Arc::new(config))
    }

    /// This engine's own settings, if it is a `T` (an ONNX Runtime library to print, a decoder's
    /// GGUF file).
    pub fn settings<T: EngineConfig>(&self) -> Option<&T> {
        (self.0.as_ref() as &dyn Any).downcast_ref()
    }

    /// Loads the model once (see [`EngineConfig::load_model`]).
    pub fn load(&self, model: ModelInput) -> Result<Backend, EngineError> {
        Ok(Backend::new(self.0.load_model(model)?))
    }

    /// What a `morph worker` process loads, where this engine's units run in them.
    pub fn processes_model(&self, model: ModelInput) -> Option<WorkerModel> {
        self.0.can().processes.then(|| self.0.worker_model(model)).flatten()
    }
}

impl Deref for EngineKind {
    type Target = dyn EngineConfig;

    fn deref(&self) -> &Self::Target {
        self.0.as_ref()
    }
}
