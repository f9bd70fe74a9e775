//! The HTTP edge: the routes, the body every call reads, the API key, and what each call records
//! in the metrics. A route family is one folder (`embeddings/`, `scores/` (classification and
//! reranking), `generation/`, `cohere/`, `tei/` (TEI's other names), `operations/`), holding its
//! request types (`requests.rs`), their checks (`validate.rs`), its handlers with their OpenAPI
//! entries, its answers (`answers.rs`), and the list of its routes (`routes()` in its `mod.rs`).
//! [`routes`] joins those lists: the router, the 404's list of routes and the OpenAPI document are
//! all made from it. A handler opens with the extractors of [`opening`] (the model it needs, the
//! body parsed and checked); the drain's deadline and the API key wrap every keyed route.

mod answers;
pub mod bounds;
mod checks;
mod cohere;
mod embeddings;
mod error_response;
mod field_schemas;
mod field_types;
pub mod fields;
mod generation;
mod opening;
mod operations;
mod scores;
mod served_facts;
mod state;
mod tei;

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, MatchedPath, Request, State};
use axum::http::HeaderValue;
use axum::http::header::{AUTHORIZATION, CONTENT_LENGTH};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Router};
use subtle::ConstantTimeEq;
use tracing::Instrument;
use utoipa::openapi::{OpenApi as Document, PathItem};
use utoipa_axum::router::OpenApiRouter;

pub use fields::parse;
pub(crate) use operations::health::Health;
pub(crate) use served_facts::ServedFacts;
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
        // A body declared over the limit is refused at once, before it is sent or read.
        let declared =
            request.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|len| len > MAX_BODY_BYTES as u64) {
            return Err(CallError::BodyTooLarge { limit: MAX_BODY_BYTES }.into_response());
        }
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

/// Every route with its OpenAPI entry, family by family: the one list the router, the 404's list
/// of routes and the document are made from. The probes (`/health`, `/ready`, `/live`, TEI's
/// `GET /` and `/ping`), `/metrics` and the document stay open; every other route is keyed,
/// wrapped by `wrap_keyed`.
fn routes(
    wrap_keyed: impl FnOnce(OpenApiRouter<AppState>) -> OpenApiRouter<AppState>,
) -> OpenApiRouter<AppState> {
    let keyed = OpenApiRouter::new()
        .merge(embeddings::routes())
        .merge(scores::routes())
        .merge(generation::routes())
        .merge(cohere::routes())
        .merge(tei::routes())
        .merge(operations::keyed_routes());
    OpenApiRouter::with_openapi(operations::openapi::base())
        .merge(wrap_keyed(keyed))
        .merge(operations::open_routes())
        .merge(tei::open_routes())
}

/// The OpenAPI document of every route, as an embedding server shows it.
#[cfg(test)]
pub(crate) fn document() -> Document {
    document_of(&ServedFacts::example())
}

/// The OpenAPI document of every route, as a server of `facts` shows it.
pub(crate) fn document_of(facts: &ServedFacts) -> Document {
    operations::openapi::finish(routes(|keyed| keyed).into_openapi(), facts)
}

/// `GET /docs`: `document` as a page to read and try the routes from.
pub(crate) fn document_page<S: Clone + Send + Sync + 'static>(document: &Document) -> Router<S> {
    operations::openapi::page(document)
}

/// The server's routes: a keyed one needs the API key when one is set and is answered 503 once
/// the drain's deadline passes; a path no route has gets a 404 that lists them.
pub fn router(state: AppState) -> Router {
    let (routes, document) = routes(|keyed| {
        keyed
            .route_layer(middleware::from_fn_with_state(state.clone(), within_drain))
            .route_layer(middleware::from_fn_with_state(state.clone(), require_key))
    })
    .split_for_parts();
    let document = operations::openapi::finish(document, &state.served_facts());
    let listed: Arc<str> = route_list(&document).into();
    routes
        .merge(document_page(&document))
        .fallback(move |request: Request| no_route(request, listed.clone()))
        .layer(middleware::from_fn_with_state(state.clone(), observe_calls))
        // Outside the call layer, which reads the document for a 405's methods.
        .layer(Extension(Arc::new(document)))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

/// A keyed call under the drain's deadline: once it passes, the call is answered 503 (its claims
/// cancel what it had asked of the engines).
async fn within_drain(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let answered = state.drain.or_deadline(async { Ok(next.run(request).await) }).await;
    answered.unwrap_or_else(IntoResponse::into_response)
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
pub(crate) const UNMATCHED: &str = "unmatched";

/// The document's routes by method (`POST /v1/embeddings, ...; GET /v1/models, ...`), for the
/// answer to a path that is none of them.
fn route_list(document: &Document) -> String {
    let paths = &document.paths.paths;
    let with = |method: fn(&PathItem) -> bool| {
        paths
            .iter()
            .filter(|(_, item)| method(item))
            .map(|(path, _)| path.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!("POST {}; GET {}, /docs", with(|item| item.post.is_some()), with(|item| item.get.is_some()))
}

/// A path no route has: a JSON 404 that lists the routes.
async fn no_route(request: Request, routes: Arc<str>) -> CallError {
    CallError::NotFound(format!(
        "no route {} {}; the routes: {routes} (docs/api.md)",
        request.method(),
        request.uri().path()
    ))
}

/// The methods the document lists for `route` (`GET, POST`), if it lists any (a route's
/// catch-all parameter, `{*id}`, is a plain one there).
fn methods_of(document: &Document, route: &str) -> Option<String> {
    let paths = &document.paths.paths;
    let item = paths.get(route).or_else(|| paths.get(&route.replace("{*", "{")))?;
    let methods =
        [("GET", item.get.is_some()), ("POST", item.post.is_some()), ("DELETE", item.delete.is_some())];
    let listed: Vec<&str> = methods.iter().filter(|(_, listed)| *listed).map(|(method, _)| *method).collect();
    (!listed.is_empty()).then(|| listed.join(", "))
}

/// The router's own 405 (no body, its `Allow` header added outside this layer) answered as
/// every error is, naming the methods the route takes (`allowed`, from the document).
fn method_not_allowed(
    response: Response,
    (method, path): (String, String),
    allowed: impl FnOnce() -> Option<String>,
) -> Response {
    if response.status() != axum::http::StatusCode::METHOD_NOT_ALLOWED
        || response.extensions().get::<FailureKind>().is_some()
    {
        return response;
    }
    let allowed = allowed().map_or_else(
        || "/openapi.json lists each route's method".to_string(),
        |methods| format!("it takes {methods}"),
    );
    CallError::MethodNotAllowed { method, path, allowed }.into_response()
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

/// Counts a call whose client went away before its answer (the call's future dropped), with
/// nginx's status for it, 499; nothing once the call is answered.
struct ClientLeft {
    metrics: Arc<crate::metrics::Metrics>,
    route: String,
    started: Instant,
    span: tracing::Span,
    answered: bool,
}

/// nginx's status for a call whose client closed the connection before the answer.
const CLIENT_CLOSED: u16 = 499;

impl Drop for ClientLeft {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        let seconds = self.started.elapsed().as_secs_f64();
        self.metrics.call(&self.route, CLIENT_CLOSED, seconds);
        self.span.in_scope(|| tracing::info!(status = CLIENT_CLOSED, ms = seconds * 1e3, "client left"));
    }
}

/// Runs every call in a span with its request id (the client's `x-request-id`, else a fresh
/// one, returned in the same header), so that each log line of the call carries it; logs the
/// call's answer, and counts it by route and status with its time until the answer's head (a
/// stream's body goes on after it; a path no route has under the route `unmatched`). The
/// probes, `/metrics` and `/openapi.json` are neither logged nor counted; every failed answer is
/// counted by its kind; a call whose client left before the answer, with 499 ([`ClientLeft`]).
/// A route's answer to a method it does not take is made JSON here.
async fn observe_calls(State(state): State<AppState>, request: Request, next: Next) -> Response {
    // A path no route has is counted under one label (its path could be anything).
    let route = request.extensions().get::<MatchedPath>().map_or(UNMATCHED, |p| p.as_str()).to_string();
    let asked_for_all = request.extensions().get::<OnBehalf>().is_some();
    let (method, path) = (request.method().to_string(), request.uri().path().to_string());
    let document = request.extensions().get::<Arc<Document>>().cloned();
    let wrong_method = |response| {
        let allowed = || document.as_deref().and_then(|document| methods_of(document, &route));
        method_not_allowed(response, (method, path), allowed)
    };
    if UNCOUNTED.contains(&route.as_str()) || asked_for_all {
        let response = wrong_method(next.run(request).await);
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
    let mut left = ClientLeft {
        metrics: state.driver.metrics.clone(),
        route: route.clone(),
        started,
        span: span.clone(),
        answered: false,
    };
    let mut response = wrong_method(next.run(request).instrument(span.clone()).await);
    left.answered = true;
    let (status, seconds) = (response.status().as_u16(), started.elapsed().as_secs_f64());
    state.driver.metrics.call(&route, status, seconds);
    count_failure(&state, &response);
    span.in_scope(|| tracing::info!(status, ms = seconds * 1e3, "answered"));
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    response
}
