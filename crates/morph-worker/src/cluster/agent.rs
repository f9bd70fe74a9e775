//! The host agent (`morph agent`): one per host. It registers the host in etcd (its
//! address, slots, model and host cache) and starts `morph worker` processes there when a
//! server asks: `POST /v1/workers` with the unit and the server endpoint the worker connects
//! to, answered with its pid and start kind (warm from this host's cache, or cold). `DELETE
//! /v1/workers/{pid}` stops one (after `grace_ms`, if it has not exited by itself). Each worker
//! registers itself once up; its registration is how the agent knows a cold start's prepared
//! artefact is complete and can be cached.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::remote::Endpoint;
use axum::extract::Request;
use axum::extract::{Json, Path, Query, State};
use axum::http::StatusCode;
use axum::http::header::AUTHORIZATION;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Router, serve};
use morph_core::{StartKind, TokenPlan, UnitSpec};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::lease::Registration;
use super::{ClusterConfig, ClusterError, HostRecord};
use crate::host::spawn::{Spawner, Staging};
use crate::locking::lock;

/// Who the agent is.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub cluster: ClusterConfig,
    /// The host's name in the cluster (unique).
    pub name: String,
    /// The host's address, as the server reaches it.
    pub address: IpAddr,
    /// Replicas this host may run at once.
    pub slots: u16,
}

/// What a server asks to start.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StartRequest {
    pub unit: UnitSpec,
    /// Where the worker connects (`tcp:IP:PORT` on the server).
    pub connect: String,
    /// Token plans to compile besides the plain model.
    #[serde(default)]
    pub plans: Vec<TokenPlan>,
}

/// A worker started.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Started {
    pub pid: u32,
    pub kind: StartKind,
}

#[derive(Debug, Deserialize)]
struct StopQuery {
    #[serde(default)]
    grace_ms: u64,
}

#[derive(Debug)]
pub struct Agent {
    config: AgentConfig,
    spawner: Spawner,
    registration: Registration,
    /// What the registration holds.
    record: Mutex<HostRecord>,
    /// Running workers: their unit and when to kill them (after a stop's grace).
    running: Mutex<HashMap<u32, (UnitSpec, Option<Instant>)>>,
}

impl Agent {
    /// Registers the host (agent at `http://{address}:{port}`) and returns the agent.
    pub fn register(config: AgentConfig, spawner: Spawner, port: u16) -> Result<Arc<Self>, ClusterError> {
        let record = HostRecord {
            name: config.name.clone(),
            agent: format!("http://{}", std::net::SocketAddr::new(config.address, port)),
            address: config.address,
            slots: config.slots,
            model: spawner.model().name.clone(),
            cache: Vec::new(),
        };
        let value = serde_json::to_vec(&record).map_err(|e| ClusterError::Agent(e.to_string()))?;
        let key = config.cluster.host_key(&config.name);
        let registration = Registration::new(config.cluster.etcd(), key, value, config.cluster.lease_ttl)?;
        tracing::info!(host = %config.name, agent = %record.agent, etcd = %config.cluster.etcd, "host registered");
        let record = Mutex::new(record);
        Ok(Arc::new(Self { config, spawner, registration, record, running: Mutex::new(HashMap::new()) }))
    }

    /// Serves the agent's API on `listener` until `shutdown`; then stops its workers.
    pub async fn run(
        self: Arc<Self>,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let app = Router::new()
            .route("/v1/workers", post(start).get(list))
            .route("/v1/workers/{pid}", delete(stop))
            .route_layer(middleware::from_fn_with_state(self.clone(), require_token))
            .route("/health", get(|| async { "ok" }))
            .with_state(self.clone());
        serve(listener, app).with_graceful_shutdown(shutdown).await?;
        let pids: Vec<u32> = lock(&self.running).keys().copied().collect();
        for pid in pids {
            self.stop_after(pid, Duration::ZERO);
        }
        let deadline = Instant::now() + Duration::from_secs(3);
        while !lock(&self.running).is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.spawner.clear_cache();
        Ok(())
    }

    /// Starts a worker for `request`; a thread reaps it, and caches its artefact once it is up.
    fn start(self: &Arc<Self>, request: StartRequest) -> Result<Started, String> {
        let endpoint: Endpoint = request.connect.parse()?;
        let cluster = &self.config.cluster;
        let mut extra = vec![
            format!("--etcd={}", cluster.etcd),
            format!("--cluster={}", cluster.cluster),
            format!("--host-name={}", self.config.name),
            format!("--advertise={}", self.config.address),
            format!("--lease-ttl-s={}", cluster.lease_ttl.as_secs_f64()),
        ];
        if !request.plans.is_empty() {
            let plans: Vec<String> = request.plans.iter().map(ToString::to_string).collect();
            extra.push(format!("--plans={}", plans.join(",")));
        }
        // The worker presents the cluster's token to the server it connects to.
        let env: Vec<(&str, &str)> = cluster.token().map(|t| (CLUSTER_TOKEN_ENV, t)).into_iter().collect();
        let spawned = self.spawner.spawn(request.unit, &endpoint, &extra, &env).map_err(|e| e.to_string())?;
        let pid = spawned.child.id();
        let kind = spawned.kind;
        lock(&self.running).insert(pid, (request.unit, None));
        tracing::info!(pid, unit = %request.unit, ?kind, server = %endpoint, "worker started");
        let agent = self.clone();
        std::thread::Builder::new()
            .name(format!("morph-agent-{pid}"))
            .spawn(move || agent.tend(spawned.child, spawned.staging))
            .map_err(|e| e.to_string())?;
        Ok(Started { pid, kind })
    }

    /// Watches one worker until it exits: kills it when its stop's grace is over, and takes its
    /// prepared artefact into the cache once it has registered (it is up, the artefact whole).
    fn tend(&self, mut child: std::process::Child, mut staging: Option<Staging>) {
        let pid = child.id();
        let key = self.config.cluster.worker_key(&self.config.name, pid);
        let etcd = self.config.cluster.etcd();
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                tracing::info!(pid, %status, "worker exited");
                break;
            }
            let kill_at = lock(&self.running).get(&pid).and_then(|(_, at)| *at);
            if kill_at.is_some_and(|at| Instant::now() >= at) {
                let _ = child.kill();
            }
            if staging.is_some() && etcd.get_prefix(&key).is_ok_and(|(kvs, _)| !kvs.is_empty()) {
                if let Some(staging) = staging.take() {
                    self.spawner.admit(staging);
                }
                self.publish_cache();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if let Some(staging) = staging {
            self.spawner.discard(staging);
        }
        lock(&self.running).remove(&pid);
    }

    /// Puts the host's record again with the cache's contents now.
    fn publish_cache(&self) {
        let Some((contents, ..)) = self.spawner.cache_state() else { return };
        let value = {
            let mut record = lock(&self.record);
            record.cache = contents;
            serde_json::to_vec(&*record)
        };
        if let Ok(value) = value
            && let Err(e) = self.registration.update(value)
        {
            tracing::warn!(error = %e, "publishing the host cache failed");
        }
    }

    /// Marks `pid` to be killed once `grace` is over (unless it exits first).
    fn stop_after(&self, pid: u32, grace: Duration) -> bool {
        match lock(&self.running).get_mut(&pid) {
            Some((_, at)) => {
                *at = Some(Instant::now() + grace);
                true
            }
            None => false,
        }
    }
}

async fn start(State(agent): State<Arc<Agent>>, Json(request): Json<StartRequest>) -> Response {
    let started = tokio::task::spawn_blocking(move || agent.start(request)).await;
    match started {
        Ok(Ok(started)) => (StatusCode::CREATED, Json(started)).into_response(),
        Ok(Err(e)) => error(StatusCode::UNPROCESSABLE_ENTITY, e),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

async fn list(State(agent): State<Arc<Agent>>) -> Response {
    let running: Vec<_> = lock(&agent.running)
        .iter()
        .map(|(pid, (unit, _))| json!({ "pid": pid, "unit": unit.to_string() }))
        .collect();
    Json(json!({ "host": agent.config.name, "workers": running })).into_response()
}

async fn stop(State(agent): State<Arc<Agent>>, Path(pid): Path<u32>, Query(q): Query<StopQuery>) -> Response {
    if agent.stop_after(pid, Duration::from_millis(q.grace_ms)) {
        StatusCode::ACCEPTED.into_response()
    } else {
        error(StatusCode::NOT_FOUND, format!("no worker {pid} runs on host {}", agent.config.name))
    }
}

fn error(status: StatusCode, message: String) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}

/// The variable a worker finds the cluster's token in.
pub const CLUSTER_TOKEN_ENV: &str = "MORPH_CLUSTER_TOKEN";

/// With a cluster token, the workers' API answers only a caller that presents it
/// (`Authorization: Bearer TOKEN`); `/health` stays open for probes.
async fn require_token(State(agent): State<Arc<Agent>>, request: Request, next: Next) -> Response {
    let given = request.headers().get(AUTHORIZATION).and_then(|v| v.to_str().ok());
    let given = given.and_then(|v| v.strip_prefix("Bearer "));
    match crate::wire::token_matches(agent.config.cluster.token(), given) {
        true => next.run(request).await,
        false => {
            let message = "missing or wrong cluster token: send 'Authorization: Bearer TOKEN' (the cluster's --cluster-token-file or MORPH_CLUSTER_TOKEN)";
            (StatusCode::UNAUTHORIZED, Json(json!({"error": {"message": message, "type": "unauthorized"}})))
                .into_response()
        }
    }
}
