//! `morph worker`: one pipeline-stage replica (or whole model) in its own process. The server
//! starts it; it connects back, builds its engine, runs a first batch, reports how long each
//! step took, then runs batches until the server stops it. An encoder (--model) runs ONNX
//! Runtime, built cold (weights from disk, graph written and optimised; with --prepare the
//! optimised graph is kept as a prepared artefact) or warm (--prepared: the artefact from host
//! memory, optimisation off). A decoder's prefill stage (--gguf) is built cold (its layers read
//! from the GGUF file and expanded to f32; --prepare keeps them as safetensors) or warm
//! (--prepared: those f32 tensors from host memory). With --etcd, a worker registers itself
//! once up, under a lease it keeps alive while it runs.
//!
//! `morph worker --agent` is a host's agent instead: it registers the host in etcd and starts
//! such workers on it when a server asks.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use morph_core::{PlanId, UnitSpec};
use morph_decoder::{DecoderStage, Llama};
use morph_encoder::checkpoint::Checkpoint;
use morph_encoder::ort_runtime::environment;
use morph_encoder::{OrtEncoder, OrtRuntime, Pooling};
use morph_engine::StartTimes;
use morph_engine::remote::{Built, Endpoint, serve_worker};
use morph_engine::wire::Boot;
use morph_engine::{EngineError, Rows};
use morph_fetch::Pip;
use morph_fetch::onnxruntime_library;
use morph_fetch::{ModelSource, fetch, morph_home};
use morph_server::cluster::agent::{Agent, AgentConfig};
use morph_server::cluster::lease::Registration;
use morph_server::cluster::{ClusterConfig, WorkerRecord};
use morph_server::launcher::WorkerModel;
use morph_server::launcher::spawn::Spawner;

use crate::cluster_args::{ClusterArgs, HostCacheArgs};

#[derive(Debug, Args)]
pub(crate) struct WorkerArgs {
    /// Run as this host's agent (one per host, needs --etcd and --advertise): register the
    /// host, and start workers here when a server asks.
    #[arg(long)]
    agent: bool,
    /// The agent's port for servers' requests (0: any free port).
    #[arg(long, default_value_t = 0, requires = "agent")]
    port: u16,
    /// Replicas this host may run at once (the agent's; default: its cores).
    #[arg(long, requires = "agent")]
    slots: Option<u16>,
    /// The host's name in the cluster (default: the system's host name).
    #[arg(long)]
    host_name: Option<String>,
    #[command(flatten)]
    cluster: ClusterArgs,
    #[command(flatten)]
    cache: HostCacheArgs,
    /// Where the server waits for this worker: unix:PATH or tcp:IP:PORT.
    #[arg(long, required_unless_present = "agent")]
    connect: Option<Endpoint>,
    /// The encoder's local directory (config.json, model.safetensors).
    #[arg(long, required_unless_present = "gguf", conflicts_with = "gguf")]
    model: Option<PathBuf>,
    /// The ONNX Runtime shared library (for an encoder). An agent's default: $ORT_DYLIB_PATH,
    /// else the copy in MORPH_HOME (fetched from PyPI on first use).
    #[arg(long)]
    ort_library: Option<PathBuf>,
    /// A decoder's GGUF file: the worker runs the prefill of the unit's stage (or of the whole
    /// model, for a unit without a stage).
    #[arg(long)]
    gguf: Option<PathBuf>,
    /// The unit this replica runs, as JSON (runtime shape, pipeline stage, threads), as the
    /// server writes it.
    #[arg(long, required_unless_present = "agent")]
    unit: Option<String>,
    /// Token plans to compile besides the plain model, comma separated.
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    plans: Vec<i16>,
    /// Pooling of the last stage (default: the model's own).
    #[arg(long)]
    pooling: Option<Pooling>,
    /// Cold start that also saves the engine's ready-to-run form here (a prepared artefact: the
    /// optimised graphs, or a decoder stage's f32 tensors).
    #[arg(long, conflicts_with = "prepared")]
    prepare: Option<PathBuf>,
    /// Warm start from the prepared artefact here.
    #[arg(long)]
    prepared: Option<PathBuf>,
}

pub(crate) fn run(args: WorkerArgs) -> anyhow::Result<()> {
    if args.agent {
        return run_agent(&args);
    }
    let (Some(unit), Some(connect)) = (&args.unit, &args.connect) else {
        anyhow::bail!("a worker needs --unit and --connect (or --agent)");
    };
    let unit: UnitSpec = serde_json::from_str(unit).context("--unit")?;
    let mut plans: Vec<PlanId> = args.plans.iter().map(|p| PlanId(*p)).collect();
    plans.push(PlanId::PLAIN);
    plans.sort_unstable();
    plans.dedup();
    let build = || match (&args.gguf, &args.model, &args.ort_library) {
        (Some(gguf), _, _) => build_decoder_stage(&args, gguf, unit),
        (None, Some(model), Some(library)) => build_encoder(&args, model, library, unit, &plans),
        _ => Err(EngineError::Load("a worker needs --gguf, or --model and --ort-library".into())),
    };
    let cluster = args.cluster.config()?;
    let register = |boot: &Boot| cluster.as_ref().map(|c| register(&args, c, unit, connect, boot));
    serve_worker(connect, build, register).with_context(|| format!("worker for {unit} at {connect}"))
}

/// Registers this worker (up now) under a lease kept alive until the returned value is dropped;
/// a failure is logged and the worker serves unregistered.
fn register(
    args: &WorkerArgs,
    cluster: &ClusterConfig,
    unit: UnitSpec,
    connect: &Endpoint,
    boot: &Boot,
) -> Option<Registration> {
    let host = host_name(args);
    let record = WorkerRecord {
        host: host.clone(),
        pid: boot.pid,
        model: worker_model(args).ok()?.name(),
        unit,
        address: args.cluster.advertise?,
        server: connect.to_string(),
    };
    let value = serde_json::to_vec(&record).ok()?;
    let key = cluster.worker_key(&host, boot.pid);
    Registration::new(cluster.etcd(), key, value, cluster.lease_ttl)
        .inspect_err(|e| tracing::warn!(error = %e, "registering the worker in etcd failed"))
        .ok()
}

/// --host-name, else the system's host name.
fn host_name(args: &WorkerArgs) -> String {
    args.host_name.clone().unwrap_or_else(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map_or_else(|_| "host".into(), |s| s.trim().to_string())
    })
}

/// The model this host's workers run, as the agent passes it on.
fn worker_model(args: &WorkerArgs) -> anyhow::Result<WorkerModel> {
    if let Some(gguf) = &args.gguf {
        return Ok(WorkerModel::DecoderStages { gguf: gguf.clone() });
    }
    let dir = args.model.clone().context("--model or --gguf")?;
    let library = match &args.ort_library {
        Some(library) => library.clone(),
        None => onnxruntime_library(None, &morph_home(), &Pip::from_env())?,
    };
    let pooling = args.pooling.unwrap_or_else(|| Pooling::from_model_dir(&dir));
    Ok(WorkerModel::Encoder { dir, library, pooling, plans: Vec::new() })
}

/// `morph worker --agent`: registers the host and serves the agent's API until Ctrl-C/SIGTERM.
fn run_agent(args: &WorkerArgs) -> anyhow::Result<()> {
    let cluster = args.cluster.config()?.context("--agent needs --etcd (the cluster's registry)")?;
    let address = args.cluster.advertise()?;
    let slots = args.slots.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, |n| n.get().min(usize::from(u16::MAX)) as u16)
    });
    anyhow::ensure!(slots >= 1, "--slots must be at least 1");
    let spawner = Spawner::new(std::env::current_exe()?, worker_model(args)?, args.cache.cache().as_ref())?;
    let config = AgentConfig { cluster, name: host_name(args), address, slots };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let bind = std::net::SocketAddr::new(address, args.port);
        let listener =
            tokio::net::TcpListener::bind(bind).await.with_context(|| format!("binding {bind}"))?;
        let port = listener.local_addr()?.port();
        let agent = tokio::task::spawn_blocking(move || Agent::register(config, spawner, port)).await??;
        println!("morph agent listening on http://{}", listener.local_addr()?);
        agent.run(listener, crate::serve::shutdown_signal()).await?;
        Ok(())
    })
}

/// The artefact folder a cold start keeps its prepared form in, made.
fn prepare_folder(args: &WorkerArgs) -> Result<Option<&Path>, EngineError> {
    let Some(dir) = &args.prepare else { return Ok(None) };
    std::fs::create_dir_all(dir)
        .map_err(|e| EngineError::Load(format!("prepared artefact folder {}: {e}", dir.display())))?;
    Ok(Some(dir))
}

fn build_decoder_stage(args: &WorkerArgs, gguf: &Path, unit: UnitSpec) -> Result<Built, EngineError> {
    let read = Instant::now();
    let llama = match (&args.prepared, unit.stage) {
        (Some(dir), _) => Llama::load_prepared(dir)?,
        (None, Some(stage)) => {
            Llama::load_stage(gguf, usize::from(stage.first_layer)..usize::from(stage.end_layer))?
        }
        (None, None) => Llama::load(gguf)?.0,
    };
    let read = read.elapsed();
    let build = Instant::now();
    if let Some(dir) = prepare_folder(args)? {
        llama.save_prepared(dir)?;
    }
    let times = StartTimes { read, build: build.elapsed(), ..StartTimes::default() };
    let first = match unit.stage.map_or(0, |s| s.index) {
        0 => Rows::Tokens(vec![vec![0, 0]]),
        _ => Rows::Hidden(vec![vec![0.0; 2 * llama.config.hidden]]),
    };
    let engine = DecoderStage::new(Arc::new(llama), unit.runtime, unit.stage);
    Ok(Built { engine: Box::new(engine), prepared: args.prepared.is_some(), times, first })
}

fn build_encoder(
    args: &WorkerArgs,
    model: &Path,
    library: &Path,
    unit: UnitSpec,
    plans: &[PlanId],
) -> Result<Built, EngineError> {
    let load = |e: morph_fetch::FetchError| EngineError::Load(e.to_string());
    let files = fetch(&ModelSource::Local(model.to_path_buf()), &morph_home()).map_err(load)?;
    let config = Checkpoint::config(&files)?;
    let first = match unit.stage {
        Some(stage) if stage.index > 0 => Rows::Hidden(vec![vec![0.0; 2 * config.hidden_size]]),
        _ => Rows::Tokens(vec![vec![config.pad_token_id, config.pad_token_id]]),
    };
    let (engine, times, prepared) = match &args.prepared {
        Some(dir) => {
            let shape = (config.hidden_size, config.pad_token_id);
            let (runtime, times) = OrtRuntime::load_prepared(library, dir, unit, plans, shape)?;
            (runtime, times, true)
        }
        None => {
            let prepare = prepare_folder(args)?;
            let started = Instant::now();
            environment(library)?;
            let library_time = started.elapsed();
            let read = Instant::now();
            let pooling = args.pooling.unwrap_or_else(|| Pooling::from_model_dir(&files.dir));
            let encoder = OrtEncoder::load(&files, pooling, library)?;
            let read = read.elapsed();
            let (runtime, mut times) = encoder.compile(unit, plans, prepare)?;
            times.read = read;
            times.library = library_time;
            (runtime, times, false)
        }
    };
    Ok(Built { engine: Box::new(engine), prepared, times, first })
}
