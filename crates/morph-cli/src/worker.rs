//! `morph worker`: one pipeline-stage replica (or whole model) in its own process. The server
//! starts it; it connects back, builds its engine, runs a first batch, reports how long each
//! step took, then runs batches until the server stops it. An encoder (--model) runs ONNX
//! Runtime, built cold (weights from disk, graph written and optimised; with --prepare the
//! optimised graph is kept as a prepared artefact) or warm (--prepared: the artefact from host
//! memory, optimisation off). A decoder's prefill stage (--gguf) is built cold (its layers read
//! from the GGUF file and expanded to f32; --prepare keeps them as safetensors) or warm
//! (--prepared: those f32 tensors from host memory). With --etcd, a worker registers itself
//! once up, under a lease it keeps alive while it runs. A host's agent (`morph agent`) starts
//! workers the same way when a server asks.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use morph_core::{TokenPlan, UnitSpec};
use morph_decoder::{DecoderStage, Llama};
use morph_encoder::checkpoint::Checkpoint;
use morph_encoder::ort_session::environment;
use morph_encoder::{OrtEncoder, OrtRuntime, given_or_model_pooling};
use morph_engine::StartTimes;
use morph_engine::{EngineError, Rows};
use morph_fetch::{ModelSource, fetch, morph_home};
use morph_worker::cluster::lease::Registration;
use morph_worker::cluster::{ClusterConfig, WorkerRecord};
use morph_worker::remote::{Built, Endpoint, serve_engine};
use morph_worker::wire::Boot;

use crate::cluster_args::{ClusterArgs, host_name};
use crate::worker_model_args::WorkerModelArgs;

#[derive(Debug, Args)]
pub(crate) struct WorkerArgs {
    /// The host's name in the cluster (default: the system's host name).
    #[arg(long)]
    host_name: Option<String>,
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Where the server waits for this worker: unix:PATH or tcp:IP:PORT.
    #[arg(long)]
    connect: Endpoint,
    #[command(flatten)]
    model: WorkerModelArgs,
    /// The unit this replica runs, as JSON (runtime shape, pipeline stage, threads), as the
    /// server writes it.
    #[arg(long)]
    unit: String,
    /// Token plans to compile besides the plain model, comma separated (as `morph serve --plans`).
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    plans: Vec<TokenPlan>,
    /// Cold start that also saves the engine's ready-to-run form here (a prepared artefact: the
    /// optimised graphs, or a decoder stage's f32 tensors).
    #[arg(long, conflicts_with = "prepared")]
    prepare: Option<PathBuf>,
    /// Warm start from the prepared artefact here.
    #[arg(long)]
    prepared: Option<PathBuf>,
}

pub(crate) fn run(args: WorkerArgs) -> anyhow::Result<()> {
    let connect = &args.connect;
    let unit: UnitSpec = serde_json::from_str(&args.unit).context("--unit")?;
    let mut plans = args.plans.clone();
    plans.push(TokenPlan::Plain);
    plans.sort_unstable();
    plans.dedup();
    let build = || match (&args.model.gguf, &args.model.model, &args.model.ort_library) {
        (Some(gguf), _, _) => build_decoder_stage(&args, gguf, unit),
        (None, Some(model), Some(library)) => build_encoder(&args, model, library, unit, &plans),
        _ => Err(EngineError::Load("a worker needs --gguf, or --model and --ort-library".into())),
    };
    let cluster = args.cluster.config()?;
    let register = |boot: &Boot| cluster.as_ref().map(|c| register(&args, c, unit, connect, boot));
    let token = cluster.as_ref().and_then(ClusterConfig::token);
    serve_engine(connect, token, build, register).with_context(|| format!("worker for {unit} at {connect}"))
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
    let host = host_name(args.host_name.as_deref());
    let record = WorkerRecord {
        host: host.clone(),
        pid: boot.pid,
        model: args.model.worker_model().ok()?.name,
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
        (None, None) => Llama::load(gguf)?.llama,
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
    plans: &[TokenPlan],
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
            let pooling = given_or_model_pooling(args.model.pooling, &files.dir)?;
            let encoder = OrtEncoder::load(&files, pooling, library)?.with_dtype(args.model.dtype)?;
            let read = read.elapsed();
            let (runtime, mut times) = encoder.compile(unit, plans, prepare)?;
            times.read = read;
            times.library = library_time;
            (runtime, times, false)
        }
    };
    Ok(Built { engine: Box::new(engine), prepared, times, first })
}
