//! `GET /info`, `GET /metrics`.

use axum::Json;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use morph_core::{HostId, ShapeKind, StageSpec};
use morph_encoder::Pooling;
use serde::Serialize;

use crate::api::{AppState, Served};
use crate::launcher::StartReport;
use crate::metrics::HostGauges;
use morph_worker::cluster::hosts::RemoteHosts;
use morph_worker::host::cache::CachedArtefact;

/// `GET /info`: the model, its runtimes and instances, the policy and how instances run; the
/// fields a text-embeddings-inference client reads are there too, under TEI's names.
#[derive(Debug, Serialize)]
pub(super) struct Info {
    #[serde(flatten)]
    tei: TeiInfo,
    model: String,
    dim: usize,
    pooling: Option<Pooling>,
    engine: String,
    max_input_length: u32,
    max_client_batch: usize,
    /// An embedding model's prompts (a call's `prompt_name`), and the one put before a text
    /// whose call names none.
    prompts: Vec<String>,
    default_prompt_name: Option<String>,
    runtimes: Vec<RuntimeInfo>,
    /// The policy's own description (its name and configuration).
    policy: serde_json::Value,
    workers: Workers,
    /// The length predictor, on a generation server with one.
    predictor: Option<serde_json::Value>,
    uptime_s: f64,
    version: &'static str,
}

/// TEI's `/info` fields.
#[derive(Debug, Serialize)]
struct TeiInfo {
    model_id: String,
    model_dtype: &'static str,
    /// `{"embedding": {"pooling": "mean"}}`, or `{"generation": {}}` on a decoder.
    model_type: serde_json::Value,
    max_client_batch_size: usize,
    auto_truncate: bool,
}

/// A unit and its instances.
#[derive(Debug, Serialize)]
struct RuntimeInfo {
    runtime: String,
    kind: ShapeKind,
    max_len: u32,
    max_batch: u32,
    unit: String,
    stage: Option<StageSpec>,
    threads: Option<u16>,
    instances: usize,
}

/// How instances run: threads of this server, or `morph worker` processes (on this host, with
/// its host cache; or on the cluster's hosts).
#[derive(Debug, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum Workers {
    Thread,
    Process {
        instances: Vec<WorkerInfo>,
        parked: Vec<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        host_cache: Option<Option<CacheInfo>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cluster: Option<ClusterInfo>,
    },
}

/// One worker process: its instance, unit, host and how it started.
#[derive(Debug, Serialize)]
struct WorkerInfo {
    instance: u32,
    unit: String,
    /// The host's number (QUART's server).
    server: u16,
    /// The host's name, in a cluster.
    host: Option<String>,
    pid: u32,
    start: StartReport,
}

/// A host cache of prepared artefacts.
#[derive(Debug, Serialize)]
struct CacheInfo {
    artefacts: Vec<CachedArtefact>,
    bytes: u64,
    budget_bytes: u64,
    evictions: u64,
}

/// The cluster found through etcd, and its hosts by number (slots 0: left).
#[derive(Debug, Serialize)]
struct ClusterInfo {
    etcd: String,
    name: String,
    hosts: Vec<HostInfo>,
}

#[derive(Debug, Serialize)]
struct HostInfo {
    server: u16,
    name: String,
    slots: u16,
    up: bool,
    agent: Option<String>,
    workers: usize,
    host_cache: Option<Vec<CachedArtefact>>,
}

/// The model, its runtimes and instances, the policy and how instances run (TEI's fields too).
#[utoipa::path(get, path = "/info", tag = "operations",
    responses((status = 200, description = "What this server serves and how.", body = Object)))]
pub(super) async fn info(State(state): State<AppState>) -> Json<Info> {
    let m = &state.model;
    let runtimes = state
        .driver
        .instance_counts()
        .iter()
        .map(|(unit, count)| {
            let r = unit.runtime;
            RuntimeInfo {
                runtime: r.to_string(),
                kind: r.kind,
                max_len: r.max_len,
                max_batch: r.max_batch,
                unit: unit.to_string(),
                stage: unit.stage,
                threads: unit.threads,
                instances: *count,
            }
        })
        .collect();
    let predictor = match &state.served {
        Served::Generation(generator) => generator.predictor(),
        Served::Embeddings(_) => None,
    };
    let model_type = match &state.served {
        Served::Embeddings(_) => serde_json::json!({ "embedding": { "pooling": m.pooling } }),
        Served::Generation(_) => serde_json::json!({ "generation": {} }),
    };
    let tei = TeiInfo {
        model_id: m.name().to_string(),
        model_dtype: m.dtype,
        model_type,
        max_client_batch_size: state.max_client_batch,
        auto_truncate: false,
    };
    Json(Info {
        tei,
        model: m.name().to_string(),
        dim: m.dim,
        pooling: m.pooling,
        engine: m.engine.clone(),
        max_input_length: m.max_input_len,
        max_client_batch: state.max_client_batch,
        prompts: m.prompts.names().into_iter().map(str::to_string).collect(),
        default_prompt_name: m.prompts.default_name().map(str::to_string),
        runtimes,
        policy: state.driver.policy_description(),
        workers: workers(&state),
        predictor,
        uptime_s: state.started.elapsed().as_secs_f64(),
        version: env!("CARGO_PKG_VERSION"),
    })
}

fn workers(state: &AppState) -> Workers {
    let launcher = state.driver.launcher();
    let Some(processes) = launcher.processes() else { return Workers::Thread };
    let remote = processes.remote();
    let host = |id: HostId| remote.and_then(|r| r.name(id));
    let instances = state
        .driver
        .worker_starts()
        .into_iter()
        .map(|(id, unit, host_id, start)| WorkerInfo {
            instance: id.0,
            unit: unit.to_string(),
            server: host_id.0,
            host: host(host_id),
            pid: start.pid,
            start,
        })
        .collect();
    let parked = processes.parked().iter().map(ToString::to_string).collect();
    let cache = || {
        processes.cache_state().map(|(artefacts, bytes, budget_bytes, evictions)| CacheInfo {
            artefacts,
            bytes,
            budget_bytes,
            evictions,
        })
    };
    match remote {
        None => Workers::Process { instances, parked, host_cache: Some(cache()), cluster: None },
        Some(remote) => {
            Workers::Process { instances, parked, host_cache: None, cluster: Some(cluster(remote)) }
        }
    }
}

fn cluster(remote: &RemoteHosts) -> ClusterInfo {
    let hosts = remote
        .host_states()
        .into_iter()
        .map(|h| HostInfo {
            server: h.id.0,
            up: h.record.is_some(),
            agent: h.record.as_ref().map(|r| r.agent.clone()),
            host_cache: h.record.map(|r| r.cache),
            name: h.name,
            slots: h.slots,
            workers: h.workers,
        })
        .collect();
    let config = remote.membership().config();
    ClusterInfo { etcd: config.etcd.clone(), name: config.cluster.clone(), hosts }
}

/// Prometheus metrics.
#[utoipa::path(get, path = "/metrics", tag = "operations", security(()),
    responses((status = 200, description = "The Prometheus text format.", body = String,
        content_type = "text/plain")))]
pub(super) async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    let instances: Vec<(String, usize)> =
        state.driver.instance_counts().iter().map(|(unit, n)| (unit.to_string(), *n)).collect();
    let hosts: Vec<HostGauges> = match state.driver.launcher().processes().and_then(|p| p.remote()) {
        Some(remote) => remote
            .host_states()
            .iter()
            .map(|h| HostGauges {
                name: h.name.clone(),
                up: h.record.is_some(),
                slots: h.slots,
                workers: h.workers,
            })
            .collect(),
        None => Vec::new(),
    };
    if let Served::Generation(generator) = &state.served
        && let Some(stats) = generator.prompt_cache_stats()
    {
        state.driver.metrics.prompt_cache(&stats);
    }
    let text = state.driver.metrics.render(&instances, &state.driver.policy_gauges(), &hosts);
    ([(CONTENT_TYPE, "text/plain; version=0.0.4")], text)
}
