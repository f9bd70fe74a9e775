//! The routes of a several-model server that speak for every model: `GET /v1/models` (every
//! model's names), `/info` and `/ready` (each model's, or one's with `?model=NAME`),
//! `/openapi.json` (what any model takes, or one's own with `?model=NAME`), and `/metrics` (each
//! model's series with a `model` label, and the server's own). Each asks the models' own routes
//! with the call's headers, so an API key is checked as a model checks it.

use std::sync::Arc;

use axum::Json;
use axum::body::to_bytes;
use axum::extract::{Path, Query, Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Shared, exposition, forward, pick};
use crate::api::{OnBehalf, authorized};
use crate::error::CallError;

/// `?model=NAME`: one model's answer rather than every one's.
#[derive(Debug, Deserialize)]
pub(super) struct OneModel {
    model: Option<String>,
}

/// Each model's answer to `GET path` with `headers`: its status and body.
async fn ask_each(shared: &Shared, path: &str, headers: &HeaderMap) -> Vec<(StatusCode, Vec<u8>)> {
    let mut answers = Vec::with_capacity(shared.models.len());
    for model in &shared.models {
        let response = forward(model.router.clone(), on_behalf(path, headers.clone())).await;
        let status = response.status();
        let body = to_bytes(response.into_body(), usize::MAX).await.map(|b| b.to_vec()).unwrap_or_default();
        answers.push((status, body));
    }
    answers
}

/// A model's answer, as it gave it.
fn as_given(status: StatusCode, body: Vec<u8>) -> Response {
    (status, [(CONTENT_TYPE, "application/json")], body).into_response()
}

/// `GET path` of the one model `?model=` names, as it answers it.
async fn ask_one(shared: &Shared, name: &str, path: &str, headers: HeaderMap) -> Response {
    let model = match pick::by_name(name, &shared.candidates()) {
        Ok(at) => &shared.models[at],
        // Which models there are is not told to a caller without the key.
        Err(_) if !authorized(&shared.models[0].state, &headers) => {
            return shared.refuse(CallError::Unauthorized);
        }
        Err(error) => return shared.refuse(error),
    };
    forward(model.router.clone(), on_behalf(path, headers)).await
}

/// `GET path` with the outer call's `headers`, made on its behalf.
fn on_behalf(path: &str, headers: HeaderMap) -> Request {
    let mut request = Request::get(path).body(axum::body::Body::empty()).expect("a GET of a fixed path");
    *request.headers_mut() = headers;
    request.extensions_mut().insert(OnBehalf);
    request
}

/// OpenAI's list: every model under each of its names.
pub(super) async fn list_models(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let mut data = Vec::new();
    for (status, body) in ask_each(&shared, "/v1/models", &headers).await {
        if status != StatusCode::OK {
            return as_given(status, body);
        }
        let listed: Value = serde_json::from_slice(&body).unwrap_or_default();
        data.extend(listed["data"].as_array().cloned().unwrap_or_default());
    }
    Json(json!({"object": "list", "data": data})).into_response()
}

/// One model by any of its names.
pub(super) async fn one_model(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    ask_one(&shared, &id, &format!("/v1/models/{id}"), headers).await
}

/// Every model's `/info` under `models`, with the core budget; one model's with `?model=`.
pub(super) async fn info(
    State(shared): State<Arc<Shared>>,
    Query(one): Query<OneModel>,
    headers: HeaderMap,
) -> Response {
    if let Some(name) = one.model {
        return ask_one(&shared, &name, "/info", headers).await;
    }
    let mut models = Vec::new();
    for ((status, body), hosted) in ask_each(&shared, "/info", &headers).await.into_iter().zip(&shared.models)
    {
        if status != StatusCode::OK {
            return as_given(status, body);
        }
        let mut info: Value = serde_json::from_slice(&body).unwrap_or_default();
        info["kind"] = json!(hosted.kind.label());
        info["slo_ms"] = json!(hosted.slo.as_secs_f64() * 1e3);
        models.push(info);
    }
    let accounts = shared.budget.accounts();
    let cores: Vec<Value> = shared
        .models
        .iter()
        .zip(&accounts)
        .map(|(m, a)| {
            json!({"model": m.names[0], "held": a.held, "waiting": a.waiting,
                   "core_seconds": a.core_seconds, "slack_ms": a.slack as f64 / 1e6})
        })
        .collect();
    Json(json!({"cores": shared.budget.cores(), "models": models, "core_accounts": cores})).into_response()
}

/// Ready while every model is: 503 naming those that are not (each model's own readiness is
/// `?model=NAME`, so one model that cannot serve leaves the others ready).
pub(super) async fn ready(
    State(shared): State<Arc<Shared>>,
    Query(one): Query<OneModel>,
    headers: HeaderMap,
) -> Response {
    if let Some(name) = one.model {
        return ask_one(&shared, &name, "/ready", headers).await;
    }
    let answers = ask_each(&shared, "/ready", &headers).await;
    let all_ready = answers.iter().all(|(status, _)| *status == StatusCode::OK);
    let models: serde_json::Map<String, Value> = shared
        .models
        .iter()
        .zip(answers)
        .map(|(m, (_, body))| (m.names[0].clone(), serde_json::from_slice(&body).unwrap_or_default()))
        .collect();
    let status = if all_ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let word = if all_ready { "ok" } else { "unavailable" };
    (status, Json(json!({"status": word, "models": models}))).into_response()
}

/// The API's document as the server takes calls: a value any model takes, `model` on every
/// model route; one model's own with `?model=`.
pub(super) async fn document(
    State(shared): State<Arc<Shared>>,
    Query(one): Query<OneModel>,
    headers: HeaderMap,
) -> Response {
    match one.model {
        Some(name) => ask_one(&shared, &name, "/openapi.json", headers).await,
        None => Json(&shared.document).into_response(),
    }
}

/// Every model's series labelled with its name, and the server's own.
pub(super) async fn metrics(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let answers = ask_each(&shared, "/metrics", &headers).await;
    let models: Vec<(String, String)> = shared
        .models
        .iter()
        .zip(answers)
        .map(|(m, (_, body))| (m.names[0].clone(), String::from_utf8_lossy(&body).into_owned()))
        .collect();
    let own = shared.metrics.render(&[], &[], &[]);
    ([(CONTENT_TYPE, "text/plain; version=0.0.4")], exposition::merge(&own, &models)).into_response()
}
