//! Liveness and readiness apart, as Kubernetes probes them: `GET /live` answers while the
//! process does; `GET /ready` (and `/health`, its older name) is 503 while no request could be
//! served: every instance of a stage gone (their workers dead, not yet replaced), or the server
//! shutting down. While the server starts, `crate::starting` answers them.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;

use serde::Serialize;
use utoipa::ToSchema;

use crate::api::AppState;

/// `GET /live`, `GET /ready`: "ok", or "unavailable" or "starting" and why.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Health {
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Liveness: "ok" while the process runs.
#[utoipa::path(get, path = "/live", tag = "operations", security(()),
    responses((status = 200, description = "Alive.", body = Health)))]
pub(super) async fn live() -> Json<Health> {
    Json(Health { status: "ok", reason: None })
}

/// `/ready`'s older name.
#[utoipa::path(get, path = "/health", tag = "operations", security(()),
    responses((status = 200, description = "Ready.", body = Health),
        (status = 503, description = "Not ready, and why.", body = Health)))]
pub(super) async fn health(state: State<AppState>) -> (StatusCode, Json<Health>) {
    ready(state).await
}

/// Readiness: 503 while no request could be served, or the server is shutting down.
#[utoipa::path(get, path = "/ready", tag = "operations", security(()),
    responses((status = 200, description = "Ready.", body = Health),
        (status = 503, description = "Not ready, and why.", body = Health)))]
pub(crate) async fn ready(State(state): State<AppState>) -> (StatusCode, Json<Health>) {
    let unready = |reason: &str| {
        let health = Health { status: "unavailable", reason: Some(reason.to_string()) };
        (StatusCode::SERVICE_UNAVAILABLE, Json(health))
    };
    if state.drain.begun() {
        return unready("the server is shutting down");
    }
    if !state.driver.can_serve() {
        return unready(
            "no instance can serve: a stage has none (their workers died and are not replaced yet)",
        );
    }
    (StatusCode::OK, Json(Health { status: "ok", reason: None }))
}
