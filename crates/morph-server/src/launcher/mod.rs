//! The launcher: loads the model once and starts workers, one per instance (one unit), at
//! start-up and whenever the policy launches one: encoder engine workers, or decoder workers
//! running generations by iterations. In-process workers are threads and share the weights
//! kept in host memory (a launch after start-up is warm); with [`ProcessConfig`], encoder
//! replicas and a decoder's prefill stages are `morph worker` processes ([`process`]) started
//! cold, warm or hot.

pub mod host_cache;
pub mod process;
pub mod spawn;

pub use process::{ProcessConfig, ProcessLauncher, StartReport};
pub use spawn::WorkerModel;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use morph_core::{ModelId, PlanId, Profile, RuntimeSpec, ServerId, Servers, StageSpec, UnitKind, UnitSpec};
use morph_engine::decoder::{
    DecodeBackend, DecoderKernels, DecoderStage, DecoderWorker, GgufTokenizer, Iterations, Llama,
    StepperShape, load_decoder,
};
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
    /// ONNX Runtime sessions of the graph Morph writes for each instance's unit (a runtime
    /// shape, a layer range), one per token plan in `plans` (0, the plain model, always), or of
    /// the user's ONNX file `onnx` with its free dimensions pinned.
    Ort { library: PathBuf, onnx: Option<PathBuf>, plans: Vec<PlanId> },
    /// Emulated instances taking their latency from a profile; vectors are placeholders.
    Emulated { profile: Arc<Profile>, dim: usize },
    /// A decoder LM from a GGUF file, for generation: each instance a continuous batch,
    /// feeding prompts `prefill_chunk` tokens per iteration at most (0: whole prompts), its
    /// steps run by `kernels`.
    Decoder { gguf: PathBuf, prefill_chunk: usize, kernels: DecoderKernels },
}

impl EngineKind {
    pub fn label(&self) -> &'static str {
        match self {
            EngineKind::Candle => "candle",
            EngineKind::Ort { .. } => "onnxruntime",
            EngineKind::Emulated { .. } => "emulated",
            EngineKind::Decoder { kernels, .. } => kernels.label(),
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
    /// Encoder replicas run as worker processes.
    processes: Option<ProcessLauncher>,
}

#[derive(Debug)]
enum Source {
    Candle(Arc<Encoder>),
    /// The encoder and the token plans every instance compiles.
    Ort(OrtEncoder, Vec<PlanId>),
    Emulated {
        profile: Arc<Profile>,
        dim: usize,
    },
    /// The decoder (its shape and tokenizer; its weights too on candle), what runs its
    /// generations' steps, and the most prompt tokens a generation feeds per iteration (0: all).
    Decoder(Arc<(Llama, GgufTokenizer)>, Arc<dyn DecodeBackend>, usize),
}

/// One running instance: the unit it runs, the server (host) it runs on and its worker.
#[derive(Debug)]
pub struct Worker {
    pub unit: UnitSpec,
    pub server: ServerId,
    pub engine: WorkerEngine,
    /// How a worker process started (none for a thread of this process).
    pub start: Option<StartReport>,
}

#[derive(Debug)]
pub enum WorkerEngine {
    Encoder(EngineWorker),
    /// A decoder, and the reports of its iterations for the driver to take and forward.
    Decoder {
        worker: DecoderWorker,
        iterations: Option<Iterations>,
    },
}

impl Launcher {
    pub fn new(files: &ModelFiles, pooling: Pooling, kind: &EngineKind) -> Result<Self, EngineError> {
        let source = match kind {
            EngineKind::Candle => Source::Candle(Arc::new(Encoder::load(files, pooling)?)),
            EngineKind::Ort { library, onnx, plans } => {
                let encoder = match onnx {
                    None => OrtEncoder::load(files, pooling, library)?,
                    Some(onnx) => OrtEncoder::load_file(files, onnx, pooling, library)?,
                };
                let mut plans = plans.clone();
                plans.push(PlanId::PLAIN);
                plans.sort_unstable();
                plans.dedup();
                Source::Ort(encoder, plans)
            }
            EngineKind::Emulated { profile, dim } => return Ok(Self::emulated(profile.clone(), *dim)),
            EngineKind::Decoder { gguf, prefill_chunk, kernels } => {
                return Self::decoder_from(gguf, *prefill_chunk, *kernels);
            }
        };
        Ok(Self { source, started: AtomicU32::new(0), processes: None })
    }

    /// A launcher of emulated instances that sleep for `profile`'s latency.
    pub fn emulated(profile: Arc<Profile>, dim: usize) -> Self {
        Self { source: Source::Emulated { profile, dim }, started: AtomicU32::new(0), processes: None }
    }

    /// A launcher of decoder instances of the GGUF model at `gguf`, feeding prompts
    /// `prefill_chunk` tokens per iteration at most (0: whole prompts), stepped by `kernels`.
    pub fn decoder_from(
        gguf: &std::path::Path,
        prefill_chunk: usize,
        kernels: DecoderKernels,
    ) -> Result<Self, EngineError> {
        let (model, backend) = load_decoder(gguf, kernels)?;
        Ok(Self {
            source: Source::Decoder(model, backend, prefill_chunk),
            started: AtomicU32::new(0),
            processes: None,
        })
    }

    /// Runs encoder replicas (Morph's own ONNX graphs only) or a decoder's prefill stages as
    /// `morph worker` processes.
    pub fn with_processes(mut self, config: ProcessConfig, model: WorkerModel) -> Result<Self, EngineError> {
        let fits = match (&self.source, &model) {
            (Source::Ort(encoder, _), WorkerModel::Encoder { .. }) => encoder.layers().is_some(),
            (Source::Decoder(..), WorkerModel::DecoderStages { .. }) => true,
            _ => false,
        };
        if !fits {
            let what = "worker processes run the ONNX graphs Morph writes (--engine ort, no --onnx) or a decoder's prefill stages";
            return Err(EngineError::Unsupported(what.into()));
        }
        self.processes = Some(ProcessLauncher::new(config, model)?);
        Ok(self)
    }

    /// The worker processes' launcher, if replicas run as processes.
    pub fn processes(&self) -> Option<&ProcessLauncher> {
        self.processes.as_ref()
    }

    /// Takes a retired worker back: a worker process may be parked for a later hot start
    /// (`None`); anything else is handed back to be stopped.
    pub fn retire(&self, worker: Worker) -> Option<Worker> {
        match (&self.processes, worker) {
            (Some(p), Worker { unit, server, engine: WorkerEngine::Encoder(engine), start: Some(start) }) => {
                p.park(unit, server, engine, start.pid).map(|engine| Worker {
                    unit,
                    server,
                    engine: WorkerEngine::Encoder(engine),
                    start: Some(start),
                })
            }
            (_, worker) => Some(worker),
        }
    }

    /// Stops parked workers and gives the host cache's memory back (at shutdown).
    pub fn shutdown(&self) {
        if let Some(p) = &self.processes {
            p.shutdown();
        }
    }

    /// The hosts replicas run on, as QUART's servers, when they are found through etcd.
    pub fn servers(&self) -> Option<Servers> {
        Some(self.processes.as_ref()?.remote()?.servers())
    }

    /// Hosts that joined, left or came back since the last call: (server, slots now).
    pub fn slot_changes(&self) -> Vec<(ServerId, u16)> {
        self.processes.as_ref().and_then(ProcessLauncher::remote).map_or_else(Vec::new, |r| r.slot_changes())
    }

    /// Whether the agent of `server`'s host answers (`None`: no cluster). A host that does not
    /// loses its slots at once.
    pub fn host_alive(&self, server: ServerId) -> Option<bool> {
        Some(self.processes.as_ref()?.remote()?.host_alive(server))
    }

    /// Worker processes whose registration went away since the last call: (server, pid).
    pub fn gone_workers(&self) -> Vec<(ServerId, u32)> {
        self.processes.as_ref().and_then(ProcessLauncher::remote).map_or_else(Vec::new, |r| r.gone_workers())
    }

    /// Output dimension of every instance.
    pub fn dim(&self) -> usize {
        match &self.source {
            Source::Candle(encoder) => encoder.dim(),
            Source::Ort(encoder, _) => encoder.dim(),
            Source::Emulated { dim, .. } => *dim,
            Source::Decoder(model, ..) => model.0.config.hidden,
        }
    }

    /// The decoder and its tokenizer, when this launcher serves generation.
    pub fn decoder(&self) -> Option<&Arc<(Llama, GgufTokenizer)>> {
        match &self.source {
            Source::Decoder(model, ..) => Some(model),
            _ => None,
        }
    }

    /// The unit an instance of `runtime` runs: a whole decoder or encoder, as this serves.
    pub fn unit(&self, runtime: RuntimeSpec) -> UnitSpec {
        match self.source {
            Source::Decoder(..) => UnitSpec::decoder(runtime),
            _ => UnitSpec::encoder(runtime),
        }
    }

    /// The units of the encoder cut into `count` pipeline stages of consecutive layers, as
    /// even as the layer count allows (emulated instances: one nominal layer per stage).
    pub fn stage_units(&self, runtime: RuntimeSpec, count: u16) -> Result<Vec<UnitSpec>, EngineError> {
        let layers = match &self.source {
            Source::Ort(encoder, _) => encoder.layers().ok_or_else(|| {
                EngineError::Unsupported(
                    "pipeline stages of a user's ONNX file (Morph's own graphs only)".into(),
                )
            })?,
            Source::Emulated { .. } => usize::from(count),
            // A decoder's stages run its prefill only.
            Source::Decoder(model, ..) => model.0.config.layers,
            Source::Candle(_) => {
                return Err(EngineError::Unsupported(
                    "pipeline stages need --engine ort (or emulated, or a decoder's prefill)".into(),
                ));
            }
        };
        if count == 0 || usize::from(count) > layers {
            return Err(EngineError::Unsupported(format!("{count} stages of a {layers}-layer model")));
        }
        let stage = |k| StageSpec::even(ModelId(0), k, count, layers as u16);
        Ok((0..count).map(|k| UnitSpec::encoder(runtime).with_stage(stage(k))).collect())
    }

    /// One engine instance of `unit`, not yet on a thread (`morph profile` times these).
    pub fn engine(&self, unit: UnitSpec) -> Result<Box<dyn Engine>, EngineError> {
        let spec = unit.runtime;
        Ok(match &self.source {
            Source::Candle(_) if unit.stage.is_some() => {
                return Err(EngineError::Unsupported("pipeline stages on candle".into()));
            }
            Source::Candle(encoder) => Box::new(CandleRuntime::new(encoder.clone(), spec)?),
            Source::Ort(encoder, plans) => Box::new(encoder.instance(unit, plans)?),
            Source::Emulated { profile, dim } => Box::new(EmulatedRuntime::new(profile.clone(), unit, *dim)),
            Source::Decoder(..) if unit.kind == UnitKind::Decoder => {
                return Err(EngineError::Load("a decoder runs generations, not encoder batches".into()));
            }
            // An encoder unit of a decoder is a prefill: of a stage, or (no stage) of the whole.
            Source::Decoder(model, ..) => Box::new(DecoderStage::new(model.clone(), spec, unit.stage)),
        })
    }

    /// Starts one worker of `unit` on its own thread, on `server` (`None`: wherever there is
    /// room; without a cluster, this host is server 0 and the only one).
    pub fn start(&self, unit: UnitSpec, server: Option<ServerId>) -> Result<Worker, EngineError> {
        if let Some(s) = server.filter(|s| *s != ServerId(0))
            && self.servers().is_none()
        {
            return Err(EngineError::Load(format!("no server {s}: this deployment is one host (server 0)")));
        }
        let n = self.started.fetch_add(1, Ordering::Relaxed);
        let name = format!("morph-{}-{n}", unit.runtime);
        let spawn_err = |e: std::io::Error| EngineError::Load(e.to_string());
        let engine = match (&self.source, unit.kind) {
            (Source::Decoder(model, backend, chunk), UnitKind::Decoder) => {
                let (tx, rx) = unbounded_channel();
                let hook = Box::new(move |report| {
                    let _ = tx.send(report);
                });
                let shape = decoder_shape(unit);
                let worker = DecoderWorker::spawn(name, model.clone(), backend.clone(), shape, *chunk, hook)?;
                WorkerEngine::Decoder { worker, iterations: Some(rx) }
            }
            (_, UnitKind::Decoder) => {
                return Err(EngineError::Unsupported(format!("a {:?} unit on this launcher", unit.kind)));
            }
            (_, UnitKind::Encoder) => match &self.processes {
                Some(processes) => {
                    let (worker, report, server) = processes.start(unit, server, name)?;
                    let engine = WorkerEngine::Encoder(worker);
                    return Ok(Worker { unit, server, engine, start: Some(report) });
                }
                None => {
                    WorkerEngine::Encoder(EngineWorker::spawn(name, self.engine(unit)?).map_err(spawn_err)?)
                }
            },
        };
        Ok(Worker { unit, server: ServerId(0), engine, start: None })
    }
}

/// What a decoder instance of `unit` holds: its runtime's rows as sequences of at most its
/// runtime's length each (prompt plus output), on the unit's threads or every core.
fn decoder_shape(unit: UnitSpec) -> StepperShape {
    let runtime = unit.runtime;
    let threads =
        unit.threads.map_or_else(|| std::thread::available_parallelism().map_or(1, usize::from), usize::from);
    StepperShape { sequences: runtime.max_batch as usize, seq_tokens: runtime.max_len as usize, threads }
}
