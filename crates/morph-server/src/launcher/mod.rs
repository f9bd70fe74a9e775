//! The launcher: starts instances (one unit each) of the model its [`Backend`] holds, at
//! start-up and whenever the policy launches one: an engine on its own thread
//! ([`EngineThread`]), or a decoder running generations by iterations ([`DecoderThread`]).
//! Threads share the weights kept in host memory (a launch after start-up is warm); with
//! [`ProcessConfig`], encoder replicas and a decoder's prefill stages are `morph worker`
//! processes (`morph_worker::process`) started cold, warm or hot.

pub use morph_worker::host::WorkerModel;
pub use morph_worker::{ProcessConfig, ProcessLauncher, StartReport};

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use morph_backend::Backend;
use morph_core::{GenerationCosts, HostId, HostSlots, StepBudget, UnitKind, UnitSpec};
use morph_decoder::{DecoderThread, IterationReport, StepperShape};
use morph_engine::{CoreShare, Cores, EngineError, EngineThread};
use tokio::sync::mpsc::UnboundedReceiver;

/// Starts instances of any runtime of its backend, as threads of this process or as worker
/// processes.
#[derive(Debug)]
pub struct Launcher {
    backend: Arc<Backend>,
    started: AtomicU32,
    /// Encoder replicas run as worker processes.
    processes: Option<ProcessLauncher>,
    /// The host's cores this model shares with the others of a several-model server: its
    /// instances compute only while holding their threads' worth.
    cores: Option<CoreShare>,
}

/// One running instance: the unit it runs, the host it runs on and what runs it.
#[derive(Debug)]
pub struct Instance {
    pub unit: UnitSpec,
    pub host: HostId,
    pub engine: InstanceEngine,
    /// How a worker process started (none for a thread of this process).
    pub start: Option<StartReport>,
}

#[derive(Debug)]
pub enum InstanceEngine {
    Encoder(EngineThread),
    /// A decoder, and its step reports until the driver takes them
    /// ([`crate::driver::Driver::forward_iterations`]; the channel keeps those sent before).
    Decoder {
        thread: DecoderThread,
        reports: Option<UnboundedReceiver<IterationReport>>,
    },
}

impl Launcher {
    /// A launcher of instances of `backend` (one loaded before, while profiling, is shared).
    pub fn new(backend: impl Into<Arc<Backend>>) -> Self {
        Self { backend: backend.into(), started: AtomicU32::new(0), processes: None, cores: None }
    }

    /// Instances that compute only while holding their threads of the host's shared cores.
    pub fn with_cores(self, share: CoreShare) -> Self {
        Self { cores: Some(share), ..self }
    }

    /// What computes this launcher's instances.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// Runs encoder replicas or a decoder's prefill stages as `morph worker` processes loading
    /// `model` (the engine's own: `morph_backend::EngineKind::processes_model`).
    pub fn with_processes(mut self, config: ProcessConfig, model: WorkerModel) -> Result<Self, EngineError> {
        self.processes = Some(ProcessLauncher::new(config, model)?);
        Ok(self)
    }

    /// The worker processes' launcher, if replicas run as processes.
    pub fn processes(&self) -> Option<&ProcessLauncher> {
        self.processes.as_ref()
    }

    /// Takes a retired instance back: a worker process may be parked for a later hot start
    /// (`None`); anything else is handed back to be stopped.
    pub fn retire(&self, worker: Instance) -> Option<Instance> {
        match (&self.processes, worker) {
            (
                Some(p),
                Instance { unit, host, engine: InstanceEngine::Encoder(engine), start: Some(start) },
            ) => p.park(unit, host, engine, start.pid).map(|engine| Instance {
                unit,
                host,
                engine: InstanceEngine::Encoder(engine),
                start: Some(start),
            }),
            (_, worker) => Some(worker),
        }
    }

    /// Loads `unit` on `host` ahead of a launch ([`morph_core::Action::Preload`]): a worker
    /// process is started there and parked, so a later launch of it starts hot. Threads of this
    /// process share the weights the backend already holds in memory: for them there is nothing
    /// to load.
    pub fn preload(&self, unit: UnitSpec, host: HostId) -> Result<(), EngineError> {
        if self.processes.is_none() || unit.kind != UnitKind::Batch {
            return Ok(());
        }
        let instance = self.start(unit, Some(host))?;
        drop(self.retire(instance));
        Ok(())
    }

    /// Stops parked worker processes and gives the host cache's memory back (at shutdown).
    pub fn shutdown(&self) {
        if let Some(p) = &self.processes {
            p.shutdown();
        }
    }

    /// The hosts replicas run on, as QUART's servers, when they are found through etcd.
    pub fn hosts(&self) -> Option<HostSlots> {
        Some(self.processes.as_ref()?.remote()?.host_slots())
    }

    /// Hosts that joined, left or came back since the last call: (host, slots now).
    pub fn slot_changes(&self) -> Vec<(HostId, u16)> {
        self.processes.as_ref().and_then(ProcessLauncher::remote).map_or_else(Vec::new, |r| r.slot_changes())
    }

    /// Whether the agent of `host` answers (`None`: no cluster). A host that does not
    /// loses its slots at once.
    pub fn host_alive(&self, host: HostId) -> Option<bool> {
        Some(self.processes.as_ref()?.remote()?.host_alive(host))
    }

    /// Whether instances run as worker processes of this host only (no cluster): their exits
    /// are seen in the process table.
    pub fn local_processes(&self) -> bool {
        self.processes.as_ref().is_some_and(|p| p.remote().is_none())
    }

    /// Worker processes whose registration went away since the last call: (host, pid).
    pub fn gone_workers(&self) -> Vec<(HostId, u32)> {
        self.processes.as_ref().and_then(ProcessLauncher::remote).map_or_else(Vec::new, |r| r.gone_workers())
    }

    /// Starts one instance of `unit` on its own thread, on `host` (`None`: wherever there is
    /// room; without a cluster, this host is host 0 and the only one).
    pub fn start(&self, unit: UnitSpec, host: Option<HostId>) -> Result<Instance, EngineError> {
        if let Some(s) = host.filter(|s| *s != HostId(0))
            && self.hosts().is_none()
        {
            return Err(EngineError::Load(format!("no host {s}: this deployment is one host (host 0)")));
        }
        let n = self.started.fetch_add(1, Ordering::Relaxed);
        let name = format!("morph-{}-{n}", unit.runtime);
        let spawn_err = |e: std::io::Error| EngineError::Load(e.to_string());
        let engine = match (self.backend.decoder_steps(), unit.kind) {
            (Some((decoder, steps)), UnitKind::Generation) => {
                let (reports_tx, reports) = tokio::sync::mpsc::unbounded_channel();
                let shape = decoder_shape(unit, steps.batch_threads);
                let (chunk, cores) = (steps.prefill_chunk, self.cores.clone());
                // A driver gone (shutdown) is told nothing; the thread stops with its handle.
                let post = Box::new(move |report| _ = reports_tx.send(report));
                let thread = DecoderThread::spawn_sharing(name, decoder.clone(), shape, chunk, post, cores)?;
                InstanceEngine::Decoder { thread, reports: Some(reports) }
            }
            (_, UnitKind::Generation) => {
                return Err(EngineError::Unsupported(format!("a {:?} unit on this launcher", unit.kind)));
            }
            (_, UnitKind::Batch) => match &self.processes {
                Some(processes) => {
                    let (worker, report, host) = processes.start(unit, host, name)?;
                    let engine = InstanceEngine::Encoder(worker);
                    return Ok(Instance { unit, host, engine, start: Some(report) });
                }
                None => {
                    let cores = self.cores.clone().map(|share| (share, unit_threads(unit)));
                    let engine = self.backend.engine(unit)?;
                    InstanceEngine::Encoder(
                        EngineThread::spawn_sharing(name, engine, cores).map_err(spawn_err)?,
                    )
                }
            },
        };
        Ok(Instance { unit, host: HostId(0), engine, start: None })
    }
}

impl Launcher {
    /// What one step of a decoder instance may feed: each prompt `--prefill-chunk` tokens at
    /// most, and where the host's cores are shared with other models one chunk in all (a step
    /// holds its cores to its end, and every other model's computation waits that long).
    pub fn step_budget(&self) -> StepBudget {
        let chunk = match self.backend.decoder_steps() {
            Some((_, steps)) => u32::try_from(steps.prefill_chunk).unwrap_or(u32::MAX),
            None => 0,
        };
        let shared = self.cores.is_some() && chunk > 0;
        StepBudget { prefill_chunk: chunk, step_prompt_tokens: shared.then_some(chunk) }
    }

    /// What a generation costs on an instance of `unit` (its decode step and a prompt token's
    /// prefill), measured now on the decoder's kernels with the instance's threads.
    pub fn generation_costs(&self, unit: UnitSpec) -> Result<GenerationCosts, EngineError> {
        match self.backend.decoder_steps() {
            Some((decoder, steps)) => {
                let started = std::time::Instant::now();
                let shape = decoder_shape(unit, steps.batch_threads);
                let kernels = decoder.kernels.as_ref();
                // On a thread of its own: measured on the server's building thread, every decoder
                // step after it ran 3× slower (35 ms against 11.6 ms a token, one stream of
                // SmolLM2 on a 2-core Xeon); the instances' threads are spawned from that one
                // (what carries over was not pinned down).
                let costs = std::thread::scope(|scope| {
                    scope.spawn(|| morph_decoder::costs::measure(kernels, shape)).join()
                })
                .map_err(|_| EngineError::Inference("measuring the generation costs panicked".into()))??;
                let (step_ms, prefill_token_ms) = (costs.step_ms, costs.prefill_token_ms);
                let took_ms = started.elapsed().as_secs_f64() * 1e3;
                tracing::info!(step_ms, ?prefill_token_ms, took_ms, "generation costs measured");
                Ok(costs)
            }
            None => Err(EngineError::Unsupported(
                "generation costs are a decoder's; this model is an encoder".into(),
            )),
        }
    }
}

/// What a decoder instance of `unit` holds: its runtime's rows as sequences of at most its
/// runtime's length each (prompt plus output), on the unit's threads or every core; a step that
/// feeds more than one token (a prompt's chunk, several sequences) on `batch_threads` (default:
/// the unit's threads). Sharing a host's cores, it computes on every core while nothing else
/// does (`morph_decoder::width`).
fn decoder_shape(unit: UnitSpec, batch_threads: Option<u16>) -> StepperShape {
    let runtime = unit.runtime;
    let threads = unit_threads(unit);
    let shape = StepperShape::new(runtime.max_batch as usize, runtime.max_len as usize, usize::from(threads));
    StepperShape { batch_threads: usize::from(batch_threads.unwrap_or(threads)), ..shape }
}

/// The threads an instance of `unit` computes on: the unit's, or every core.
fn unit_threads(unit: UnitSpec) -> Cores {
    unit.threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, |n| Cores::try_from(n.get()).unwrap_or(Cores::MAX))
    })
}
