//! `POST /v1/classify`: OTAS's tasks on the served encoder. The body names a `task` (one of the
//! heads the server carries), an `input` (string or array), optionally `slo_ms` (the answer's
//! deadline, from arrival) and `utility` (what an answer in time is worth to the caller; default
//! 1). Each input is scheduled with that service class, so a policy that weighs them (`otas`)
//! chooses the batch's token plan; the answer names the label, every class's score and the
//! plan. A task the server lacks is a 404 naming the tasks served; a deadline that cannot be met
//! is a 504 naming it.

use std::time::Instant;

use axum::Json;
use axum::extract::State;
use morph_core::TaskId;
use morph_core::time::ms_to_nanos;
use serde_json::{Value, json};

use super::embed::{pool_texts, record};
use super::validate;
use super::{AppState, Body};
use crate::error::ApiError;

pub(super) async fn classify(
    State(state): State<AppState>,
    Body(body): Body,
) -> Result<Json<Value>, ApiError> {
    let started = Instant::now();
    let result = handle(&state, &body).await;
    record(&state, started, &result);
    result
}

async fn handle(state: &AppState, body: &[u8]) -> Result<Json<Value>, ApiError> {
    let body = validate::object(body)?;
    let asked = validate::optional_string(&body, "task")?
        .ok_or_else(|| ApiError::validation("task", "is required"))?;
    let heads = state.heads.as_ref();
    let task = heads.and_then(|h| h.find(asked)).ok_or_else(|| ApiError::UnknownTask {
        asked: asked.to_string(),
        served: match heads {
            Some(h) => h.tasks().iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", "),
            None => "none (the task heads read all-MiniLM-L6-v2, not this server's model)".into(),
        },
    })?;
    let texts = validate::texts(&body, "input", state.max_client_batch)?;
    let slo = validate::optional_number_in(&body, "slo_ms", 0.0, 86_400_000.0)?.map(ms_to_nanos);
    let utility = validate::number_in(&body, "utility", 1.0, 0.0, 1e6)?;
    let cut = validate::bool_or(&body, "truncate", false)?;
    let service = Some((TaskId(task as u16), slo, utility));
    let (pooled, tokens) = pool_texts(state, texts, "input", cut, service).await?;
    let heads = heads.ok_or_else(|| ApiError::validation("task", "no heads"))?;
    let mut data = Vec::with_capacity(pooled.len());
    for (index, p) in pooled.iter().enumerate() {
        let answer = heads.classify(task, p.plan, &p.vector).map_err(ApiError::Engine)?;
        let scores: serde_json::Map<String, Value> =
            answer.scores.into_iter().map(|(class, s)| (class, json!(s))).collect();
        data.push(json!({ "index": index, "label": answer.label, "scores": scores, "plan": p.plan.0 }));
    }
    Ok(Json(json!({
        "object": "list",
        "task": asked,
        "model": state.model.name,
        "data": data,
        "usage": { "prompt_tokens": tokens, "total_tokens": tokens },
    })))
}
