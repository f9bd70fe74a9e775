//! A server that listens before it can serve: the port opens at once, and until the model is
//! loaded (fetched, profiled, its instances started) `/live` answers 200, `/ready` and
//! `/health` answer 503 with the step the start is at (`profiling 1x2: 3/8`), and every other
//! route answers a 503 of type `starting` with `Retry-After`. A startup probe, a load balancer
//! and a client all see why the server is not serving yet. Once built, the server's own routes
//! answer on the same port and connections.

use std::sync::{Arc, Mutex, OnceLock};

use axum::Json;
use axum::Router;
use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use tower::ServiceExt;

use crate::api::Health;
use crate::error::CallError;

/// Where a start is, for `/ready` while it lasts and for the log: each step is logged as a line
/// (whatever stderr is: a terminal, a file, a container's log).
#[derive(Debug, Clone)]
pub struct StartupSteps(Arc<Mutex<String>>);

impl Default for StartupSteps {
    fn default() -> Self {
        Self(Arc::new(Mutex::new("starting".into())))
    }
}

impl StartupSteps {
    /// The start has reached `step`.
    pub fn step(&self, step: impl Into<String>) {
        let step = step.into();
        tracing::info!(target: "morph_server::starting", "{step}");
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = step;
    }

    /// The step the start is at.
    pub fn current(&self) -> String {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The routes while the server starts, then the server's own (see the module doc).
#[derive(Debug, Clone)]
pub(crate) struct Gate {
    app: Arc<OnceLock<Router>>,
    steps: StartupSteps,
}

impl Gate {
    pub(crate) fn new(steps: StartupSteps) -> Self {
        Self { app: Arc::default(), steps }
    }

    /// From now on the server's own routes answer.
    pub(crate) fn open(&self, app: Router) {
        let _ = self.app.set(app);
    }

    pub(crate) fn router(&self) -> Router {
        let gate = self.clone();
        Router::new().fallback(move |request: Request| {
            let gate = gate.clone();
            async move {
                match gate.app.get() {
                    Some(app) => app.clone().oneshot(request).await.into_response(),
                    None => starting(request.method(), request.uri().path(), gate.steps.current()),
                }
            }
        })
    }
}

/// What a route answers while the server starts.
fn starting(method: &Method, path: &str, step: String) -> Response {
    let probe = method == Method::GET || method == Method::HEAD;
    match path {
        "/live" if probe => Json(Health { status: "ok", reason: None }).into_response(),
        "/ready" | "/health" | "/" | "/ping" if probe => {
            let health = Health { status: "starting", reason: Some(step) };
            (StatusCode::SERVICE_UNAVAILABLE, Json(health)).into_response()
        }
        _ => CallError::Starting(step).into_response(),
    }
}
