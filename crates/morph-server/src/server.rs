//! `morph serve`: builds the deployment from a [`ServerConfig`] and runs the HTTP server until
//! shutdown, then drains: in-flight calls finish, engine threads are joined.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use morph_core::{HostId, HostSlots, RuntimeSpec};
use morph_decoder::DecoderKernels;
use morph_encoder::tasks::served::TaskHeads;
use morph_encoder::{Pooling, TextTokenizer};
use morph_engine::EngineError;
use morph_fetch::ModelFiles;
use morph_policy::registry::{self, Context, Family, PolicyKind};
use tokio::net::TcpListener;

use crate::api::{AppState, ServedModel, router};
use crate::connections::ConnectionLimits;
use crate::driver::Driver;
use crate::launcher::{Launcher, ProcessConfig, WorkerModel};
use crate::metrics::Metrics;
use crate::prediction::PredictorConfig;
use crate::stage_timing;
use morph_backend::{Backend, EngineKind};

#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The encoder's files; `None` with a decoder engine (its GGUF holds everything).
    pub model: Option<ModelFiles>,
    /// `None`: as the model directory says (sentence-transformers' pooling config), else mean.
    pub pooling: Option<Pooling>,
    pub engine: EngineKind,
    /// Runtimes for policies that do not choose their own.
    pub runtimes: Vec<RuntimeSpec>,
    /// Instances of each runtime (of each stage); for policies that choose their own runtimes,
    /// the total.
    pub instances: usize,
    /// Pipeline stages each runtime's encoder is cut into (1: the whole model).
    pub stages: u16,
    /// Intra-op threads of each instance of `runtimes` (`None`: the engine's default, every
    /// core).
    pub threads: Option<u16>,
    /// The scheduling policy by name (see `morph_policy::registry`), its parameters (JSON
    /// object) and what it may take from the deployment (profile, SLO).
    pub policy: String,
    pub policy_params: serde_json::Value,
    pub policy_context: Context,
    pub api_key: Option<String>,
    pub max_client_batch: usize,
    /// Generation: predicted output lengths for the scheduler (SSJF).
    pub predictor: PredictorConfig,
    /// Deadlines and caps for client connections.
    pub limits: ConnectionLimits,
    /// Encoder replicas as `morph worker` processes (`None`: threads of this process).
    pub workers: Option<ProcessConfig>,
    /// Pipeline policies: the tokens of the one request each stage is timed on at start-up.
    pub stage_timing_len: u32,
}

#[derive(Debug)]
pub struct Server {
    state: AppState,
    limits: ConnectionLimits,
}

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Policy(#[from] registry::PolicyError),
    #[error("{0}")]
    Config(String),
}

impl Server {
    pub fn build(config: ServerConfig) -> Result<Self, BuildError> {
        if config.instances == 0 {
            return Err(BuildError::Config("at least one instance is needed".into()));
        }
        let decoder = matches!(config.engine, EngineKind::Decoder { .. });
        if decoder && config.workers.is_some() && config.stages < 2 {
            let msg = "worker processes run a decoder's prefill stages (--stages N); whole decoders generate in threads of the server";
            return Err(BuildError::Config(msg.into()));
        }
        if let EngineKind::Decoder { kernels: DecoderKernels::LlamaCpp, .. } = config.engine
            && config.stages >= 2
        {
            let msg = "a decoder's prefill stages run on candle (--decoder-kernels candle), not llama.cpp";
            return Err(BuildError::Config(msg.into()));
        }
        let kind = PolicyKind::find(&config.policy)?;
        let pipelined = kind.needs.stages;
        if config.workers.is_some() && !kind.runs_in_worker_processes() {
            let msg = format!(
                "policy '{}' runs its instances as threads of the server; --workers process runs with dynamic-batching or a pipeline policy",
                config.policy
            );
            return Err(BuildError::Config(msg));
        }
        let (launcher, tokenizer, name, pooling) = match (&config.engine, &config.model) {
            (EngineKind::Decoder { gguf, prefill_chunk, kernels }, _) => {
                let launcher = Launcher::new(Backend::decoder(gguf, *prefill_chunk, *kernels)?);
                let launcher = match &config.workers {
                    None => launcher,
                    Some(workers) => launcher
                        .with_processes(workers.clone(), WorkerModel::DecoderStages { gguf: gguf.clone() })?,
                };
                let name =
                    gguf.file_stem().map_or_else(|| "decoder".into(), |s| s.to_string_lossy().into_owned());
                (launcher, None, name, None)
            }
            (engine, Some(files)) => {
                let pooling = config.pooling.unwrap_or_else(|| Pooling::from_model_dir(&files.dir));
                let tokenizer = Arc::new(TextTokenizer::load(&files.tokenizer)?);
                let launcher = match (&config.workers, engine) {
                    (None, _) => Launcher::new(Backend::load(files, pooling, engine)?),
                    (Some(workers), EngineKind::Ort { library, plans, .. }) => {
                        let model = WorkerModel::Encoder {
                            dir: files.dir.clone(),
                            library: library.clone(),
                            pooling,
                            plans: plans.clone(),
                        };
                        Launcher::new(Backend::load(files, pooling, engine)?)
                            .with_processes(workers.clone(), model)?
                    }
                    (Some(_), other) => {
                        let msg =
                            format!("worker processes run ONNX Runtime, not the {} engine", other.label());
                        return Err(BuildError::Config(msg));
                    }
                };
                (launcher, Some(tokenizer), files.name.clone(), Some(pooling))
            }
            (_, None) => return Err(BuildError::Config("an encoder engine needs the model's files".into())),
        };
        let mut context = config.policy_context.clone();
        if pipelined && context.pipeline.is_none() {
            context = pipeline_context(&launcher, &config, context)?;
        }
        let policy = kind.build(&config.policy_params, &context)?;
        let own_layout = policy.layout(config.instances).is_some();
        if config.runtimes.is_empty() && !own_layout {
            return Err(BuildError::Config("at least one runtime with one instance is needed".into()));
        }
        if decoder && config.stages > 1 && kind.family == Family::Generation {
            let msg = format!(
                "policy '{}' runs whole decoders; a decoder's prefill stages are batched by dynamic-batching or a pipeline policy",
                config.policy
            );
            return Err(BuildError::Config(msg));
        }
        if config.stages > 1 && own_layout && !pipelined {
            let msg = format!("policy '{}' lays out whole models; it cannot run --stages", config.policy);
            return Err(BuildError::Config(msg));
        }
        let launcher = Arc::new(launcher);
        let layout = match policy.layout(config.instances) {
            Some(layout) => layout,
            None => {
                let mut units = Vec::new();
                for runtime in &config.runtimes {
                    match config.stages {
                        0 | 1 => units.push(launcher.backend().unit(*runtime)),
                        n => units.extend(launcher.backend().stage_units(*runtime, n)?),
                    }
                }
                let units = units.into_iter().map(|u| u.with_threads_if(config.threads));
                units.flat_map(|u| std::iter::repeat_n(u, config.instances)).collect()
            }
        };
        let hosts = initial_hosts(layout.len(), launcher.hosts().as_ref());
        let workers = layout
            .iter()
            .zip(hosts)
            .map(|(u, host)| launcher.start(*u, host))
            .collect::<Result<Vec<_>, _>>()?;
        let metrics = Arc::new(Metrics::default());
        for start in workers.iter().filter_map(|w| w.start.as_ref()) {
            metrics.started(start.kind, start.total());
        }
        let predictions = config.predictor.start(metrics.clone())?.map(Arc::new);
        let driver = Driver::new(policy, workers, launcher.clone(), metrics);
        let generator = launcher.backend().decoder_model().cloned();
        let model = ServedModel {
            name,
            dim: launcher.backend().dim(),
            pooling,
            engine: config.engine.label().to_string(),
            max_input_len: layout.iter().map(|u| u.runtime.max_len).max().unwrap_or(0),
            // A decoder served in stages answers prefills, also on a policy's whole-model replicas.
            prefill_stages: if decoder && config.stages > 1 { config.stages } else { 0 },
        };
        // The task heads read all-MiniLM-L6-v2's vectors: served with that encoder only.
        let heads = match (&tokenizer, TaskHeads::builtin()) {
            (Some(_), Ok(heads)) if heads.encoder() == model.name && !decoder => Some(Arc::new(heads)),
            (_, Err(e)) => {
                tracing::warn!(error = %e, "the task heads could not be loaded; /v1/classify serves no task");
                None
            }
            _ => None,
        };
        let state = AppState {
            driver,
            tokenizer,
            generator,
            predictions,
            heads,
            model: Arc::new(model),
            api_key: config.api_key.map(Arc::from),
            max_client_batch: config.max_client_batch,
            body_timeout: config.limits.body_timeout,
            started: Instant::now(),
        };
        let limits = config.limits;
        Ok(Self { state, limits })
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serves on `listener` until `shutdown` resolves, then waits for in-flight calls (at most
    /// the drain deadline) and stops the engine threads.
    pub async fn run(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        self.state.driver.begin();
        self.state.driver.forward_iterations();
        let ticker = self.state.driver.tick_interval().map(|every| {
            let driver = self.state.driver.clone();
            tokio::spawn(async move {
                let mut interval = tokio::time::interval(Duration::from_nanos(every));
                loop {
                    interval.tick().await;
                    driver.tick();
                }
            })
        });
        let membership = self.state.driver.launcher().hosts().map(|_| {
            let driver = self.state.driver.clone();
            tokio::spawn(async move {
                let mut interval = tokio::time::interval(Duration::from_millis(100));
                loop {
                    interval.tick().await;
                    driver.sync_servers();
                }
            })
        });
        let app = router(self.state.clone());
        crate::connections::serve(listener, app, self.limits, shutdown).await;
        for task in [ticker, membership].into_iter().flatten() {
            task.abort();
        }
        let workers = self.state.driver.take_instances();
        let launcher = self.state.driver.launcher();
        let stopped = move || {
            drop(workers);
            launcher.shutdown();
        };
        tokio::task::spawn_blocking(stopped).await.map_err(std::io::Error::other)
    }
}

/// A pipeline policy's context on this one host: the stages' times measured now (unless the
/// caller gave them), and `--instances` slots to place replicas in.
fn pipeline_context(
    launcher: &Launcher,
    config: &ServerConfig,
    context: Context,
) -> Result<Context, BuildError> {
    let [runtime] = config.runtimes.as_slice() else {
        let msg = format!("policy '{}' runs one pipeline: give exactly one --runtime", config.policy);
        return Err(BuildError::Config(msg));
    };
    if config.stages < 2 {
        let msg = format!("policy '{}' sizes pipeline stages: give --stages N (N >= 2)", config.policy);
        return Err(BuildError::Config(msg));
    }
    let profile = stage_timing::measure(launcher, *runtime, config.stages, config.stage_timing_len)?;
    let slots = config.instances.max(usize::from(config.stages)).min(usize::from(u16::MAX)) as u16;
    let hosts = launcher.hosts().unwrap_or_else(|| HostSlots::new(1, slots));
    Ok(Context { pipeline: Some(Arc::new(profile)), hosts: Some(hosts), ..context })
}

/// Where the initial layout's `count` instances go: without a cluster, this host; with one,
/// the hosts in turn, each up to its slots (and in turn again once every host is full).
fn initial_hosts(count: usize, hosts: Option<&HostSlots>) -> Vec<Option<HostId>> {
    let Some(hosts) = hosts.filter(|s| !s.slots.is_empty()) else { return vec![None; count] };
    let mut used = vec![0u16; hosts.slots.len()];
    let mut next = 0;
    (0..count)
        .map(|_| {
            let n = used.len();
            let free = (0..n).map(|k| (next + k) % n).find(|&s| used[s] < hosts.slots[s]);
            let s = free.unwrap_or(next % n);
            used[s] += 1;
            next = s + 1;
            Some(HostId(s as u16))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_initial_layout_goes_round_the_hosts_within_their_slots() {
        let ids = |v: Vec<Option<HostId>>| v.into_iter().map(|s| s.map(|s| s.0)).collect::<Vec<_>>();
        assert_eq!(ids(initial_hosts(3, None)), [None, None, None], "one host: the driver's own");
        let two = HostSlots { slots: vec![2, 2] };
        assert_eq!(ids(initial_hosts(4, Some(&two))), [Some(0), Some(1), Some(0), Some(1)]);
        let uneven = HostSlots { slots: vec![1, 0, 3] };
        assert_eq!(
            ids(initial_hosts(4, Some(&uneven))),
            [Some(0), Some(2), Some(2), Some(2)],
            "a host with no slot gets none"
        );
        let small = HostSlots { slots: vec![1, 1] };
        assert_eq!(
            ids(initial_hosts(3, Some(&small))),
            [Some(0), Some(1), Some(0)],
            "past every slot: in turn again"
        );
    }
}
