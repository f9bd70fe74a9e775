//! Several models in one server (`morph serve --config FILE`): each model is a [`Server`] of its
//! own (its policy, driver, instances and metrics), all of them computing on one host's cores
//! ([`CoreBudget`]: an instance holds cores only while it computes, never more threads at once
//! than the budget has) and reached through one HTTP edge. A call reaches the model its `model`
//! field names, else the one model of its route's kind ([`pick`]); `/v1/models` lists every
//! model, `/info`, `/ready` and `/metrics` give each one's (a `model` label on every series),
//! and the core controller ([`controller`]) decides each period which model's computations take
//! cores first.

mod aggregate;
mod controller;
pub mod exposition;
pub mod pick;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{DefaultBodyLimit, FromRequest, MatchedPath, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use morph_engine::{CoreBudget, Cores};
use morph_policy::cores::CoreController;
use tokio::task::JoinHandle;
use tower::ServiceExt;

use crate::api::{AppState, Body, MAX_BODY_BYTES, Served, ServedFacts, UNMATCHED, authorized};
use crate::deployment::{BuildError, Deployment};
use crate::drain::Drain;
use crate::error::CallError;
use crate::infer::ModelKind;
use crate::metrics::Metrics;
use crate::server::{Server, Serving};
use pick::{Candidate, ServedKind, pick, route_takes_model};

/// One model of a several-model server, as its deployment file gave it.
#[derive(Debug)]
pub struct HostedSpec {
    pub deployment: Deployment,
    /// Its latency SLO (a call's; a decoder's per output token); `None`: [`default_slo`].
    pub slo: Option<Duration>,
}

/// A model's SLO when its deployment names none: what its computations' slack is a share of.
pub fn default_slo(kind: ServedKind) -> Duration {
    match kind {
        ServedKind::Encoder(ModelKind::Embedding) => Duration::from_millis(100),
        ServedKind::Encoder(ModelKind::Classifier | ModelKind::Reranker) => Duration::from_millis(1000),
        ServedKind::Generation => Duration::from_millis(200),
    }
}

/// A model as the edge and the controller see it.
#[derive(Debug)]
struct Hosted {
    names: Vec<String>,
    kind: ServedKind,
    slo: Duration,
    state: AppState,
    router: Router,
}

/// What the routes share.
#[derive(Debug)]
struct Shared {
    models: Vec<Hosted>,
    budget: Arc<CoreBudget>,
    /// The server's own series: the core controller's, calls no model took, the process.
    metrics: Arc<Metrics>,
    /// The API's document as every model together takes calls.
    document: serde_json::Value,
}

impl Shared {
    fn candidates(&self) -> Vec<Candidate<'_>> {
        self.models.iter().map(|m| Candidate { names: &m.names, kind: m.kind }).collect()
    }

    /// A failure answered before any model took the call, counted as the server's own.
    fn refuse(&self, error: CallError) -> Response {
        self.metrics.fail(error.kind());
        error.into_response()
    }

    /// A call to `route` (begun at `started`) refused before any model took it, counted as the
    /// server's own call too (under `route` where it is a model's route, else as unmatched).
    fn refuse_call(&self, route: &str, started: Instant, error: CallError) -> Response {
        let response = self.refuse(error);
        self.count_call(route, started, &response);
        response
    }

    fn count_call(&self, route: &str, started: Instant, response: &Response) {
        let route = if pick::serves(route) { route } else { UNMATCHED };
        self.metrics.call(route, response.status().as_u16(), started.elapsed().as_secs_f64());
    }
}

/// Several models behind one edge, on one core budget.
#[derive(Debug)]
pub struct App {
    shared: Arc<Shared>,
    servers: Vec<Server>,
    /// `GET /docs`: the page of the document.
    page: Router<Arc<Shared>>,
}

impl App {
    /// Builds every model in turn, each sharing `cores` of the host with the others, under one
    /// `drain`. Names must differ across models (the deployment file's check says so first).
    pub fn build(specs: Vec<HostedSpec>, cores: Cores, drain: Arc<Drain>) -> Result<Self, BuildError> {
        if specs.is_empty() {
            return Err(BuildError::Config("a several-model server needs at least one model".into()));
        }
        let budget = CoreBudget::new(cores);
        let (mut models, mut servers) = (Vec::new(), Vec::new());
        for spec in specs {
            let share = budget.share(Duration::ZERO);
            let at = share.model();
            let server =
                Server::build_draining(Deployment { cores: Some(share), ..spec.deployment }, drain.clone())?;
            let state = server.state().clone();
            let kind = match &state.served {
                Served::Generation(_) => ServedKind::Generation,
                Served::Embeddings(embedder) => ServedKind::Encoder(embedder.kind()),
            };
            let slo = spec.slo.unwrap_or_else(|| default_slo(kind));
            budget.set_slack(at, CoreController::relaxed_slack(slo));
            let router = crate::api::router(state.clone());
            models.push(Hosted { names: state.model.names.clone(), kind, slo, state, router });
            servers.push(server);
        }
        let metrics = Arc::new(Metrics::default());
        metrics.host_cores(budget.cores());
        let facts: Vec<ServedFacts> = models.iter().map(|m| m.state.served_facts()).collect();
        let document = crate::api::document_of(&ServedFacts::joined(&facts));
        let page = crate::api::document_page(&document);
        let document = serde_json::to_value(document).expect("an OpenAPI document is JSON");
        Ok(Self { shared: Arc::new(Shared { models, budget, metrics, document }), servers, page })
    }

    /// Each model's names, the first being the one its answers carry.
    pub fn model_names(&self) -> Vec<&[String]> {
        self.shared.models.iter().map(|m| m.names.as_slice()).collect()
    }
}

/// A route of the front asked with a method it does not take: each takes GET (`/` POST too).
async fn wrong_method(request: Request) -> CallError {
    let path = request.uri().path().to_string();
    let allowed = if path == "/" { "it takes GET, POST" } else { "it takes GET" };
    CallError::MethodNotAllowed { method: request.method().to_string(), path, allowed: allowed.into() }
}

impl Serving for App {
    fn router(&self) -> Router {
        let for_all = Router::new()
            .route("/v1/models", get(aggregate::list_models))
            .route("/v1/models/{*id}", get(aggregate::one_model))
            .route("/info", get(aggregate::info))
            .route_layer(middleware::from_fn_with_state(self.shared.clone(), count_own_calls));
        Router::new()
            .merge(for_all)
            .route("/ready", get(aggregate::ready))
            .route("/health", get(aggregate::ready))
            .route("/ping", get(aggregate::ready))
            .route("/", get(aggregate::ready).post(dispatch))
            .route("/metrics", get(aggregate::metrics))
            .route("/openapi.json", get(aggregate::document))
            .merge(self.page.clone())
            .method_not_allowed_fallback(wrong_method)
            .fallback(dispatch)
            .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
            .with_state(self.shared.clone())
    }

    fn start_tasks(&self) -> Vec<JoinHandle<()>> {
        let mut tasks: Vec<JoinHandle<()>> = self.servers.iter().flat_map(Server::start_tasks).collect();
        tasks.push(controller::spawn(self.shared.clone()));
        tasks
    }

    async fn stop(self, tasks: Vec<JoinHandle<()>>) -> std::io::Result<()> {
        for task in &tasks {
            task.abort();
        }
        for server in self.servers {
            server.stop(Vec::new()).await?;
        }
        Ok(())
    }
}

/// A call handed to the model it reaches. Anything but a POST goes to the first model (liveness,
/// and the 404 that lists the routes).
async fn dispatch(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let first = || shared.models[0].router.clone();
    if request.method() != axum::http::Method::POST {
        return forward(first(), request).await;
    }
    let (started, route) = (Instant::now(), request.uri().path().to_string());
    // The key first: which models there are is not told to a caller without it.
    if !authorized(&shared.models[0].state, request.headers()) {
        return shared.refuse_call(&route, started, CallError::Unauthorized);
    }
    let (parts, body) = request.into_parts();
    let ids = &shared.models[0].state;
    let bytes = match Body::from_request(Request::from_parts(parts.clone(), body), ids).await {
        Ok(Body(bytes)) => bytes,
        Err(response) => {
            count_refusal(&shared, &response);
            shared.count_call(&route, started, &response);
            return response;
        }
    };
    // Only the name is read here (the rest is skipped); the model's route parses the body.
    let named = serde_json::from_slice::<Named>(&bytes).ok().and_then(|n| n.model).and_then(|m| match m {
        serde_json::Value::String(name) => Some(name),
        _ => None,
    });
    let chosen = match pick(&route, named.as_deref(), &shared.candidates()) {
        None => return forward(first(), Request::from_parts(parts, bytes.into())).await,
        Some(Err(error)) => return shared.refuse_call(&route, started, error),
        Some(Ok(at)) => at,
    };
    let body = match named.is_some() && !route_takes_model(&route) {
        true => without_model(bytes),
        false => bytes,
    };
    forward(shared.models[chosen].router.clone(), Request::from_parts(parts, body.into())).await
}

/// A body's `model` field, whatever else it holds.
#[derive(serde::Deserialize)]
struct Named {
    model: Option<serde_json::Value>,
}

/// A TEI body (which has no `model` of its own) without the `model` that chose its model.
fn without_model(bytes: axum::body::Bytes) -> axum::body::Bytes {
    let mut json: serde_json::Value = match serde_json::from_slice(&bytes) {
        Ok(json) => json,
        Err(_) => return bytes,
    };
    match json.as_object_mut() {
        Some(object) => {
            object.remove("model");
            serde_json::to_vec(object).map_or(bytes, Into::into)
        }
        None => bytes,
    }
}

/// Counts a call to every model (`/v1/models`, `/info`) as the server's own, by route and status.
async fn count_own_calls(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>().map(|p| p.as_str().to_string()).unwrap_or_default();
    let started = Instant::now();
    let response = next.run(request).await;
    shared.metrics.call(&route, response.status().as_u16(), started.elapsed().as_secs_f64());
    response
}

/// A refusal the body's reading answered (too large, too slow), counted as the server's own.
fn count_refusal(shared: &Shared, response: &Response) {
    if let Some(kind) = response.extensions().get::<crate::metrics::FailureKind>() {
        shared.metrics.fail(*kind);
    }
}

/// `request` answered by one model's routes, which match its path afresh (this router's match,
/// left on it, would prefix theirs: `POST /` counted as route "//").
async fn forward(router: Router, mut request: Request) -> Response {
    request.extensions_mut().remove::<MatchedPath>();
    match router.oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}
