//! `GET /health`, `GET /info`, `GET /metrics`.

use axum::Json;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use morph_core::HostId;
use serde_json::{Value, json};

use crate::cluster::hosts::RemoteHosts;

use super::AppState;

pub(super) async fn health() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

pub(super) async fn info(State(state): State<AppState>) -> Json<Value> {
    let m = &state.model;
    let runtimes: Vec<Value> = state
        .driver
        .instance_counts()
        .iter()
        .map(|(unit, count)| {
            let r = unit.runtime;
            json!({"runtime": r.to_string(), "kind": r.kind, "max_len": r.max_len, "max_batch": r.max_batch,
                "unit": unit.to_string(), "stage": unit.stage, "threads": unit.threads, "instances": count})
        })
        .collect();
    Json(json!({
        "model": m.name,
        "dim": m.dim,
        "pooling": m.pooling,
        "engine": m.engine,
        "max_input_length": m.max_input_len,
        "max_client_batch": state.max_client_batch,
        "runtimes": runtimes,
        "policy": state.driver.policy_description(),
        "workers": workers(&state),
        "predictor": state.predictions.as_ref().map(|p| p.describe()),
        "uptime_s": state.started.elapsed().as_secs_f64(),
        "version": env!("CARGO_PKG_VERSION"),
    }))
}

/// Worker processes: each instance's process, server and start, the parked ones, the host
/// cache; with a cluster, its hosts (QUART's servers) as registered in etcd.
fn workers(state: &AppState) -> Value {
    let launcher = state.driver.launcher();
    let Some(processes) = launcher.processes() else { return json!({"kind": "thread"}) };
    let remote = processes.remote();
    let host = |id: HostId| remote.and_then(|r| r.name(id));
    let instances: Vec<Value> = state
        .driver
        .worker_starts()
        .into_iter()
        .map(|(id, unit, host_id, start)| {
            json!({"instance": id.0, "unit": unit.to_string(), "server": host_id.0, "host": host(host_id), "pid": start.pid, "start": start})
        })
        .collect();
    let parked: Vec<String> = processes.parked().iter().map(ToString::to_string).collect();
    let cache = processes.cache_state().map(|(contents, bytes, budget, evictions)| {
        json!({"artefacts": contents, "bytes": bytes, "budget_bytes": budget, "evictions": evictions})
    });
    match remote {
        None => json!({"kind": "process", "instances": instances, "parked": parked, "host_cache": cache}),
        Some(remote) => {
            json!({"kind": "process", "instances": instances, "parked": parked, "cluster": cluster(remote)})
        }
    }
}

/// The cluster's hosts by server number (slots 0: left), with their agents and caches.
fn cluster(remote: &RemoteHosts) -> Value {
    let hosts: Vec<Value> = remote
        .host_states()
        .into_iter()
        .map(|h| {
            json!({
                "server": h.id.0,
                "name": h.name,
                "slots": h.slots,
                "up": h.record.is_some(),
                "agent": h.record.as_ref().map(|r| r.agent.clone()),
                "workers": h.workers,
                "host_cache": h.record.map(|r| r.cache),
            })
        })
        .collect();
    let config = remote.membership().config();
    json!({"etcd": config.etcd, "name": config.cluster, "hosts": hosts})
}

pub(super) async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    let instances: Vec<(String, usize)> =
        state.driver.instance_counts().iter().map(|(unit, n)| (unit.to_string(), *n)).collect();
    let mut text = state.driver.metrics.render(&instances, &state.driver.policy_gauges());
    if let Some(remote) = state.driver.launcher().processes().and_then(|p| p.remote()) {
        text.push_str(&crate::metrics::render_cluster(&remote.host_states()));
    }
    ([(CONTENT_TYPE, "text/plain; version=0.0.4")], text)
}
