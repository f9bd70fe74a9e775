//! The HTTP edge: routes, the body every call reads, the API key, and what each call records in
//! the metrics. Each route parses its body into its request type ([`requests`]), checks it into
//! a `Valid*` value ([`validate`]), hands that to the work behind it ([`crate::infer`]) and
//! answers with its response type (`responses`).

pub mod bounds;
mod classify;
mod cohere;
mod cohere_requests;
mod embedding_types;
mod embeddings;
mod error_response;
mod field_schemas;
pub mod fields;
mod generate;
mod health;
mod info;
mod logprobs;
mod models;
mod openai_responses;
mod openapi;
mod pair_fields;
mod reply;
pub mod requests;
mod rerank;
mod response_object;
pub(crate) mod responses;
mod responses_stream;
mod state;
mod stream;
mod tei_aliases;
mod tokens;
mod tool_reply;
pub mod validate;
mod validate_output;
pub mod validate_responses;
pub mod validate_scores;

use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, MatchedPath, Request, State};
use axum::http::HeaderValue;
use axum::http::header::AUTHORIZATION;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use subtle::ConstantTimeEq;
use tracing::Instrument;

pub use fields::parse;
pub use state::{AppState, Served, ServedModel};

use crate::error::CallError;
use crate::metrics::FailureKind;

/// The largest request body read, in bytes.
pub const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// A request's raw body. One over [`MAX_BODY_BYTES`] (or one that cannot be read) is answered
/// as every error is: JSON, with its own type, counted in `/metrics`.
pub(crate) struct Body(pub Bytes);

impl FromRequest<AppState> for Body {
    type Rejection = Response;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let read = tokio::time::timeout(state.body_timeout, Bytes::from_request(request, state)).await;
        let error = match read {
            Ok(Ok(bytes)) => return Ok(Body(bytes)),
            Err(_) => CallError::BodyTimeout { seconds: state.body_timeout.as_secs_f64() },
            Ok(Err(rejection)) if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE => {
                CallError::BodyTooLarge { limit: MAX_BODY_BYTES }
            }
            Ok(Err(rejection)) => {
                CallError::MalformedJson(format!("the body could not be read: {}", rejection.body_text()))
            }
        };
        Err(error.into_response())
    }
}

/// The probes (`/health`, `/ready`, `/live`) and `/metrics` stay open; every other route needs
/// the API key when one is set.
pub fn router(state: AppState) -> Router {
    let protected = Router::new()
        .route("/v1/embeddings", post(embeddings::openai))
        .route("/embed", post(embeddings::tei))
        .route("/", post(tei_aliases::root))
        .route("/invocations", post(tei_aliases::invocations))
        .route("/embeddings", post(tei_aliases::openai))
        .route("/tokenize", post(tokens::tokenize))
        .route("/decode", post(tokens::decode))
        .route("/embed_all", post(embed_all))
        .route("/v1/classify", post(classify::classify))
        .route("/predict", post(classify::predict))
        .route("/rerank", post(rerank::rerank))
        .route("/v1/rerank", post(rerank::documents))
        .route("/v2/rerank", post(cohere::rerank_v2))
        .route("/v2/embed", post(cohere::embed_v2))
        .route("/v1/embed", post(cohere::embed_v1))
        .route("/similarity", post(embeddings::similarity))
        .route("/vertex", post(tei_aliases::vertex))
        .route("/embed_sparse", post(tei_aliases::embed_sparse))
        .route("/v1/completions", post(generate::completions))
        .route("/v1/chat/completions", post(generate::chat_completions))
        .route("/v1/responses", post(openai_responses::create))
        .route("/info", get(info::info))
        .route("/v1/models", get(models::list))
        .route("/v1/models/{*id}", get(models::one))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_key));
    Router::new()
        .merge(protected)
        .route("/health", get(health::health))
        .route("/ready", get(health::ready))
        .route("/live", get(health::live))
        .route("/", get(tei_aliases::ready_root))
        .route("/ping", get(tei_aliases::ping))
        .route("/metrics", get(info::metrics))
        .route("/openapi.json", get(openapi::document))
        .merge(openapi::page())
        .fallback(no_route)
        .layer(middleware::from_fn_with_state(state.clone(), observe_calls))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

async fn require_key(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if !authorized(&state, request.headers()) {
        return CallError::Unauthorized.into_response();
    }
    next.run(request).await
}

/// Whether `headers` carry the server's API key, or it has none.
pub(crate) fn authorized(state: &AppState, headers: &axum::http::HeaderMap) -> bool {
    let Some(key) = &state.api_key else { return true };
    let given = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok());
    let given = given.and_then(|v| v.strip_prefix("Bearer ")).unwrap_or_default();
    // Compared in constant time (for keys of equal length), so timing does not leak it.
    bool::from(given.as_bytes().ct_eq(key.as_bytes()))
}

/// The probes, the scrape and the API document and its page, left out of the call metrics and logs.
const UNCOUNTED: [&str; 7] = ["/live", "/ready", "/health", "/ping", "/metrics", "/openapi.json", "/docs"];

/// The route label of a call to a path no route has.
const UNMATCHED: &str = "unmatched";

/// Every route, for the answer to a path that is none of them.
const ROUTES: &str = "POST /v1/embeddings, /embed, /similarity, /tokenize, /decode, /v1/classify, /predict, \
     /rerank, /v1/rerank, /v2/rerank, /v2/embed, /v1/embed, /v1/completions, /v1/chat/completions, /v1/responses (and TEI's /, /invocations, \
     /vertex, /embeddings); GET /v1/models, \
     /info, /live, /ready, /health, /metrics, /openapi.json, /docs (and TEI's /, /ping)";

/// A path no route has: a JSON 404 that lists the routes.
async fn no_route(request: Request) -> CallError {
    CallError::NotFound(format!(
        "no route {} {}; the routes: {ROUTES} (docs/api.md)",
        request.method(),
        request.uri().path()
    ))
}

/// text-embeddings-inference's token-level embeddings, which Morph does not serve.
async fn embed_all() -> CallError {
    CallError::NotFound(
        "/embed_all (one vector per token) is not served: Morph's graphs pool inside the engine; \
         /embed and /v1/embeddings give one vector per input"
            .into(),
    )
}

/// Marks a call a several-model server makes to one model's routes on behalf of a call to all
/// of them (`GET /v1/models`, `/info`): neither logged nor counted by the model (the server
/// counts the outer call).
#[derive(Debug, Clone, Copy)]
pub(crate) struct OnBehalf;

/// The header that carries a call's id, taken from the client when it sends one.
const REQUEST_ID: &str = "x-request-id";

/// Counts a failed answer by its kind (every error response carries its [`FailureKind`]).
fn count_failure(state: &AppState, response: &Response) {
    if let Some(kind) = response.extensions().get::<FailureKind>() {
        state.driver.metrics.fail(*kind);
    }
}

/// Runs every call in a span with its request id (the client's `x-request-id`, else a fresh
/// one, returned in the same header), so that each log line of the call carries it; logs the
/// call's answer, and counts it by route and status with its time until the answer's head (a
/// stream's body goes on after it; a path no route has under the route `unmatched`). The
/// probes, `/metrics` and `/openapi.json` are neither logged nor counted; every failed answer is
/// counted by its kind. A route's answer to a method it does not take is made JSON here.
async fn observe_calls(State(state): State<AppState>, request: Request, next: Next) -> Response {
    // A path no route has is counted under one label (its path could be anything).
    let route = request.extensions().get::<MatchedPath>().map_or(UNMATCHED, |p| p.as_str()).to_string();
    let asked_for_all = request.extensions().get::<OnBehalf>().is_some();
    let (method, path) = (request.method().to_string(), request.uri().path().to_string());
    if UNCOUNTED.contains(&route.as_str()) || asked_for_all {
        let response = next.run(request).await;
        count_failure(&state, &response);
        return response;
    }
    let id = request
        .headers()
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128)
        .map_or_else(|| format!("{:016x}", rand::random::<u64>()), str::to_string);
    let span = tracing::info_span!("call", id = %id, route = %route);
    let started = Instant::now();
    let mut response = next.run(request).instrument(span.clone()).await;
    if response.status() == axum::http::StatusCode::METHOD_NOT_ALLOWED
        && response.extensions().get::<FailureKind>().is_none()
    {
        // The router's own 405 has no body: answered as every error is.
        let allow = response.headers().get(axum::http::header::ALLOW).cloned();
        let listed = allow.as_ref().and_then(|v| v.to_str().ok()).filter(|v| !v.is_empty());
        let allowed = listed.map_or_else(
            || "/openapi.json lists each route's method".to_string(),
            |methods| format!("it takes {methods}"),
        );
        response = CallError::MethodNotAllowed { method, path, allowed }.into_response();
        if let Some(allow) = allow {
            response.headers_mut().insert(axum::http::header::ALLOW, allow);
        }
    }
    let (status, seconds) = (response.status().as_u16(), started.elapsed().as_secs_f64());
    state.driver.metrics.call(&route, status, seconds);
    count_failure(&state, &response);
    span.in_scope(|| tracing::info!(status, ms = seconds * 1e3, "answered"));
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    response
}
