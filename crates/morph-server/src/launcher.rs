//! The in-process launcher: loads the model once and starts workers, one per instance, at
//! start-up and whenever the policy launches one: encoder engine workers, or decoder workers
//! running continuous batches.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use morph_core::{Profile, RuntimeSpec};
use morph_engine::decoder::{DecoderWorker, GgufTokenizer, Iterations, Llama};
use morph_engine::{
    CandleRuntime, EmulatedRuntime, Encoder, Engine, EngineError, EngineWorker, ModelFiles, OrtEncoder,
    Pooling,
};
use tokio::sync::mpsc::unbounded_channel;

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
    /// A decoder LM from a GGUF file, for generation: each instance a continuous batch.
    Decoder { gguf: PathBuf },
}

impl EngineKind {
    pub fn label(&self) -> &'static str {
        match self {
            EngineKind::Candle => "candle",
            EngineKind::Ort { .. } => "onnxruntime",
            EngineKind::Emulated { .. } => "emulated",
            EngineKind::Decoder { .. } => "candle-decoder",
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
    Decoder(Arc<(Llama, GgufTokenizer)>),
}

/// A decoder instance: its worker, and the reports of its iterations (finished generations'
/// keys, whether the batch is empty) for the driver to take and forward to the policy.
#[derive(Debug)]
pub struct DecoderInstance {
    pub worker: DecoderWorker,
    pub runtime: RuntimeSpec,
    pub iterations: Option<Iterations>,
}

/// One running instance.
#[derive(Debug)]
pub enum Worker {
    Encoder(EngineWorker),
    Decoder(DecoderInstance),
}

impl Worker {
    pub fn runtime(&self) -> RuntimeSpec {
        match self {
            Worker::Encoder(w) => w.handle().runtime(),
            Worker::Decoder(d) => d.runtime,
        }
    }
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
            EngineKind::Decoder { gguf } => return Self::decoder_from(gguf),
        };
        Ok(Self { source, started: AtomicU32::new(0) })
    }

    /// A launcher of decoder instances of the GGUF model at `gguf`.
    pub fn decoder_from(gguf: &std::path::Path) -> Result<Self, EngineError> {
        Ok(Self { source: Source::Decoder(Arc::new(Llama::load(gguf)?)), started: AtomicU32::new(0) })
    }

    /// Output dimension of every instance.
    pub fn dim(&self) -> usize {
        match &self.source {
            Source::Candle(encoder) => encoder.dim(),
            Source::Ort(encoder) => encoder.dim(),
            Source::Emulated { dim, .. } => *dim,
            Source::Decoder(model) => model.0.config.hidden,
        }
    }

    /// The decoder and its tokenizer, when this launcher serves generation.
    pub fn decoder(&self) -> Option<&Arc<(Llama, GgufTokenizer)>> {
        match &self.source {
            Source::Decoder(model) => Some(model),
            _ => None,
        }
    }

    /// One engine instance of `spec`, not yet on a thread (`morph profile` times these).
    pub fn engine(&self, spec: RuntimeSpec) -> Result<Box<dyn Engine>, EngineError> {
        Ok(match &self.source {
            Source::Candle(encoder) => Box::new(CandleRuntime::new(encoder.clone(), spec)?),
            Source::Ort(encoder) => Box::new(encoder.runtime(spec)?),
            Source::Emulated { profile, dim } => Box::new(EmulatedRuntime::new(profile.clone(), spec, *dim)),
            Source::Decoder(_) => {
                return Err(EngineError::Load("a decoder runs generations, not encoder batches".into()));
            }
        })
    }

    /// Starts one worker of `spec` on its own thread.
    pub fn start(&self, spec: RuntimeSpec) -> Result<Worker, EngineError> {
        let n = self.started.fetch_add(1, Ordering::Relaxed);
        let name = format!("morph-{spec}-{n}");
        let spawn_err = |e: std::io::Error| EngineError::Load(e.to_string());
        if let Source::Decoder(model) = &self.source {
            let (tx, rx) = unbounded_channel();
            let hook = Box::new(move |finished: Vec<u64>, empty: bool| {
                let _ = tx.send((finished, empty));
            });
            let worker = DecoderWorker::spawn(name, model.clone(), hook).map_err(spawn_err)?;
            return Ok(Worker::Decoder(DecoderInstance { worker, runtime: spec, iterations: Some(rx) }));
        }
        let engine = self.engine(spec)?;
        Ok(Worker::Encoder(EngineWorker::spawn(name, engine).map_err(spawn_err)?))
    }
}
