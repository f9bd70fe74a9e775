//! Embeddings in two formats: `POST /v1/embeddings` (OpenAI: `input` a string or an array of
//! strings, vectors always L2-normalised; Morph's extension `"truncate": true` cuts long
//! inputs) and `POST /embed` (text-embeddings-inference: `inputs`, `normalize` default true,
//! `truncate` default false; an array of vectors).

use axum::Json;
use axum::extract::State;

use super::requests::EmbedRequest;
use super::responses::{EmbedResponse, Embedding, EmbeddingsResponse, Usage};
use super::{AppState, Body, parse, recorded, validate};
use crate::error::ApiError;

pub(super) async fn openai(
    State(state): State<AppState>,
    Body(body): Body,
) -> Result<Json<EmbeddingsResponse>, ApiError> {
    recorded(&state, async {
        let embedder = state.embedder()?;
        let call = validate::embeddings(parse(&body)?, state.max_client_batch, &state.model.name)?;
        let out = embedder.embed(call).await?;
        let data = out
            .vectors
            .into_iter()
            .enumerate()
            .map(|(index, embedding)| Embedding { object: "embedding", index, embedding })
            .collect();
        Ok(Json(EmbeddingsResponse {
            object: "list",
            data,
            model: state.model.name.clone(),
            usage: Usage::of(out.tokens),
        }))
    })
    .await
}

pub(super) async fn tei(
    State(state): State<AppState>,
    Body(body): Body,
) -> Result<Json<EmbedResponse>, ApiError> {
    recorded(&state, async {
        let embedder = state.embedder()?;
        let request: EmbedRequest = parse(&body)?;
        Ok(Json(embedder.embed(validate::embed(request, state.max_client_batch)?).await?.vectors))
    })
    .await
}
