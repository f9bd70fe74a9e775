//! OTAS's tasks on the served encoder, in two shapes.
//!
//! `POST /v1/classify` names a `task` (one of the heads the server carries), an `input` (string
//! or array), optionally `slo_ms` (the answer's deadline, from arrival) and `utility` (what an
//! answer in time is worth to the caller; default 1). Each input is scheduled with that service
//! class, so a policy that weighs them (`otas`) chooses the batch's token plan; the answer names
//! the label, every class's score and the plan.
//!
//! `POST /predict` is text-embeddings-inference's shape: `inputs` (string or array) and the
//! `task`; it answers `[{"label", "score"}]` per input, best first (a list of them for an array).
//!
//! A task the server lacks is a 404 naming the tasks served; a deadline that cannot be met is a
//! 504 naming it.

use axum::Json;
use axum::extract::State;
use morph_core::time::ms_to_nanos;
use morph_core::{TaskId, TokenPlan};
use morph_encoder::tasks::{served::Classified, served::TaskHeads};
use serde_json::{Map, Value, json};

use super::embed::{pool_texts, recorded};
use super::validate;
use super::{AppState, Body};
use crate::error::ApiError;

pub(super) async fn classify(
    State(state): State<AppState>,
    Body(body): Body,
) -> Result<Json<Value>, ApiError> {
    recorded(&state, classify_body(&state, &body)).await
}

pub(super) async fn predict(
    State(state): State<AppState>,
    Body(body): Body,
) -> Result<Json<Value>, ApiError> {
    recorded(&state, predict_body(&state, &body)).await
}

async fn classify_body(state: &AppState, body: &[u8]) -> Result<Json<Value>, ApiError> {
    let body = validate::object(body)?;
    let (asked, answers, tokens) = answer(state, &body, "input").await?;
    let data: Vec<Value> = answers
        .into_iter()
        .enumerate()
        .map(|(index, (answer, plan))| {
            let scores: Map<String, Value> = answer.scores.into_iter().map(|(c, s)| (c, json!(s))).collect();
            json!({ "index": index, "label": answer.label, "scores": scores, "plan": plan })
        })
        .collect();
    Ok(Json(json!({
        "object": "list",
        "task": asked,
        "model": state.model.name,
        "data": data,
        "usage": { "prompt_tokens": tokens, "total_tokens": tokens },
    })))
}

async fn predict_body(state: &AppState, body: &[u8]) -> Result<Json<Value>, ApiError> {
    let body = validate::object(body)?;
    let single = matches!(body.get("inputs"), Some(Value::String(_)));
    let (_, answers, _) = answer(state, &body, "inputs").await?;
    let ranked: Vec<Value> = answers
        .into_iter()
        .map(|(mut answer, _)| {
            answer.scores.sort_by(|a, b| b.1.total_cmp(&a.1));
            json!(
                answer
                    .scores
                    .into_iter()
                    .map(|(label, score)| json!({ "label": label, "score": score }))
                    .collect::<Vec<_>>()
            )
        })
        .collect();
    Ok(Json(if single { ranked.into_iter().next().unwrap_or(Value::Null) } else { json!(ranked) }))
}

/// The task asked for, each input's answer with the plan its batch ran, and the call's tokens.
async fn answer(
    state: &AppState,
    body: &Map<String, Value>,
    field: &str,
) -> Result<(String, Vec<(Classified, TokenPlan)>, usize), ApiError> {
    let asked = validate::optional_string(body, "task")?
        .ok_or_else(|| ApiError::validation("task", "is required"))?;
    let (heads, task) = served_task(state.heads.as_deref(), asked)?;
    let texts = validate::texts(body, field, state.max_client_batch)?;
    let slo = validate::optional_number_in(body, "slo_ms", 0.0, 86_400_000.0)?.map(ms_to_nanos);
    let utility = validate::number_in(body, "utility", 1.0, 0.0, 1e6)?;
    let cut = validate::bool_or(body, "truncate", false)?;
    let service = Some((TaskId(task as u16), slo, utility));
    let (pooled, tokens) = pool_texts(state, texts, field, cut, service).await?;
    let answers = pooled
        .iter()
        .map(|p| heads.classify(task, p.plan, &p.vector).map(|a| (a, p.plan)).map_err(ApiError::Engine))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((asked.to_string(), answers, tokens))
}

/// The heads and the index of task `asked`, or a 404 naming the tasks served.
fn served_task<'a>(heads: Option<&'a TaskHeads>, asked: &str) -> Result<(&'a TaskHeads, usize), ApiError> {
    match heads {
        Some(h) => h.find(asked).map(|task| (h, task)).ok_or_else(|| ApiError::UnknownTask {
            asked: asked.to_string(),
            served: h.tasks().iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", "),
        }),
        None => Err(ApiError::UnknownTask {
            asked: asked.to_string(),
            served: "none (the task heads read all-MiniLM-L6-v2, not this server's model)".into(),
        }),
    }
}
