//! `POST /v1/embeddings` in the OpenAI format. `input` is a string or an array of strings;
//! vectors are always L2-normalised. Morph extension: `"truncate": true` cuts long inputs.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::embed::{embed_texts, recorded};
use super::validate;
use super::{AppState, Body};
use crate::error::ApiError;

pub(super) async fn embeddings(
    State(state): State<AppState>,
    Body(body): Body,
) -> Result<Json<Value>, ApiError> {
    recorded(&state, handle(&state, &body)).await
}

async fn handle(state: &AppState, body: &[u8]) -> Result<Json<Value>, ApiError> {
    let body = validate::object(body)?;
    let texts = validate::texts(&body, "input", state.max_client_batch)?;
    if let Some(asked) = validate::optional_string(&body, "model")?
        && asked != state.model.name
    {
        return Err(ApiError::UnknownModel { asked: asked.into(), served: state.model.name.clone() });
    }
    if let Some(format) = validate::optional_string(&body, "encoding_format")?
        && format != "float"
    {
        return Err(ApiError::validation("encoding_format", "only \"float\" is supported"));
    }
    let cut = validate::bool_or(&body, "truncate", false)?;
    let out = embed_texts(state, texts, "input", cut, true).await?;
    let data: Vec<Value> = out
        .vectors
        .into_iter()
        .enumerate()
        .map(|(index, embedding)| json!({"object": "embedding", "index": index, "embedding": embedding}))
        .collect();
    Ok(Json(json!({
        "object": "list",
        "data": data,
        "model": state.model.name,
        "usage": {"prompt_tokens": out.tokens, "total_tokens": out.tokens},
    })))
}
