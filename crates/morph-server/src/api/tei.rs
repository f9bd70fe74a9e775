//! `POST /embed` in the text-embeddings-inference format: `inputs` (string or array),
//! `normalize` (default true), `truncate` (default false). Returns an array of vectors.

use axum::Json;
use axum::extract::State;

use super::embed::{embed_texts, recorded};
use super::validate;
use super::{AppState, Body};
use crate::error::ApiError;

pub(super) async fn embed(
    State(state): State<AppState>,
    Body(body): Body,
) -> Result<Json<Vec<Vec<f32>>>, ApiError> {
    recorded(&state, handle(&state, &body)).await
}

async fn handle(state: &AppState, body: &[u8]) -> Result<Json<Vec<Vec<f32>>>, ApiError> {
    let body = validate::object(body)?;
    let texts = validate::texts(&body, "inputs", state.max_client_batch)?;
    let normalize = validate::bool_or(&body, "normalize", true)?;
    let cut = validate::bool_or(&body, "truncate", false)?;
    Ok(Json(embed_texts(state, texts, "inputs", cut, normalize).await?.vectors))
}
