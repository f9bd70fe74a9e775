//! `morph worker`: one pipeline-stage replica (or whole model) in its own process. The server
//! starts it; it connects back, builds its engine, runs a first batch, reports how long each
//! step took, then runs batches until the server stops it. An encoder (--model) runs ONNX
//! Runtime, built cold (weights from disk, graph written and optimised; with --prepare the
//! optimised graph is kept as a prepared artefact) or warm (--prepared: the artefact from host
//! memory, optimisation off). A decoder's prefill stage (--gguf) is built cold (its layers read
//! from the GGUF file and expanded to f32; --prepare keeps them as safetensors) or warm
//! (--prepared: those f32 tensors from host memory). With --etcd, a worker registers itself
//! once up, under a lease it keeps alive while it runs. A host's agent (`morph agent`) starts
//! workers the same way when a server asks. Each engine builds its own unit here
//! (`OrtEngine::start_worker`, `DecoderEngine::start_stage`, in `morph_backend::engines`).

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use morph_backend::WorkerStart;
use morph_backend::engines::{DecoderEngine, OrtEngine};
use morph_core::{TokenPlan, UnitSpec};
use morph_engine::EngineError;
use morph_worker::cluster::lease::Registration;
use morph_worker::cluster::{ClusterConfig, WorkerRecord};
use morph_worker::remote::{Endpoint, serve_engine};
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
    let build = || {
        let start = WorkerStart { unit, prepared: args.prepared.as_deref(), prepare: prepare_folder(&args)? };
        let model = &args.model;
        match (&model.gguf, &model.model, &model.ort_library) {
            (Some(gguf), _, _) => DecoderEngine::start_stage(gguf, start),
            (None, Some(dir), Some(library)) => {
                OrtEngine::start_worker(dir, library, model.pooling, model.dtype, &args.plans, start)
            }
            _ => Err(EngineError::Load("a worker needs --gguf, or --model and --ort-library".into())),
        }
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
