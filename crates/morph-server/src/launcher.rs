//! The in-process launcher: loads the model once and starts engine workers, one per instance,
//! at start-up and whenever the policy launches one.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use morph_core::{Profile, RuntimeSpec};
use morph_engine::{
    CandleRuntime, EmulatedRuntime, Encoder, Engine, EngineError, EngineWorker, ModelFiles, OrtEncoder,
    Pooling,
};

/// What computes the batches.
#[derive(Debug, Clone)]
pub enum EngineKind {
    /// The candle encoder on the CPU.
    Candle,
    /// ONNX Runtime sessions, one per instance, of the graph Morph writes for the runtime's
    /// shape, or of the user's ONNX file `onnx` with its free dimensions pinned.
    Ort { library: PathBuf, onnx: Option<PathBuf> },
    /// Emulated instances taking their latency from a profile; vectors are placeholders.
    Emulated { profile: Arc<Profile>, dim: usize },
}

impl EngineKind {
    pub fn label(&self) -> &'static str {
        match self {
            EngineKind::Candle => "candle",
            EngineKind::Ort { .. } => "onnxruntime",
            EngineKind::Emulated { .. } => "emulated",
        }
    }
}

/// Starts workers of any runtime. The weights are loaded once and kept (the host-memory
/// parameter cache: a new runtime starts without reading them from disk again); candle
/// instances share them, ONNX Runtime instances are compiled from them.
#[derive(Debug)]
pub struct Launcher {
    source: Source,
    started: AtomicU32,
}

#[derive(Debug)]
enum Source {
    Candle(Arc<Encoder>),
    Ort(OrtEncoder),
    Emulated { profile: Arc<Profile>, dim: usize },
}

impl Launcher {
    pub fn new(files: &ModelFiles, pooling: Pooling, kind: &EngineKind) -> Result<Self, EngineError> {
        let source = match kind {
            EngineKind::Candle => Source::Candle(Arc::new(Encoder::load(files, pooling)?)),
            EngineKind::Ort { library, onnx: None } => {
                Source::Ort(OrtEncoder::load(files, pooling, library)?)
            }
            EngineKind::Ort { library, onnx: Some(onnx) } => {
                Source::Ort(OrtEncoder::load_file(files, onnx, pooling, library)?)
            }
            EngineKind::Emulated { profile, dim } => Source::Emulated { profile: profile.clone(), dim: *dim },
        };
        Ok(Self { source, started: AtomicU32::new(0) })
    }

    /// Output dimension of every instance.
    pub fn dim(&self) -> usize {
        match &self.source {
            Source::Candle(encoder) => encoder.dim(),
            Source::Ort(encoder) => encoder.dim(),
            Source::Emulated { dim, .. } => *dim,
        }
    }

    /// One engine instance of `spec`, not yet on a thread (`morph profile` times these).
    pub fn engine(&self, spec: RuntimeSpec) -> Result<Box<dyn Engine>, EngineError> {
        Ok(match &self.source {
            Source::Candle(encoder) => Box::new(CandleRuntime::new(encoder.clone(), spec)?),
            Source::Ort(encoder) => Box::new(encoder.runtime(spec)?),
            Source::Emulated { profile, dim } => Box::new(EmulatedRuntime::new(profile.clone(), spec, *dim)),
        })
    }

    /// Starts one worker of `spec` on its own thread.
    pub fn start(&self, spec: RuntimeSpec) -> Result<EngineWorker, EngineError> {
        let engine = self.engine(spec)?;
        let n = self.started.fetch_add(1, Ordering::Relaxed);
        EngineWorker::spawn(format!("morph-{spec}-{n}"), engine).map_err(|e| EngineError::Load(e.to_string()))
    }
}
