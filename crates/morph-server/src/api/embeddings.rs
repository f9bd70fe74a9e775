//! Embeddings in two formats: `POST /v1/embeddings` (OpenAI: `input` strings or token ids,
//! vectors always L2-normalised, as numbers or base64; Morph's extension `"truncate": true` cuts
//! long inputs) and `POST /embed` (text-embeddings-inference: `inputs`, `normalize` default
//! true, `truncate` default false; an array of vectors); and TEI's `POST /similarity` on them.

use axum::Json;
use axum::extract::State;

use super::requests::SimilarityRequest;
use super::requests::{EmbedRequest, EmbeddingsRequest};
use super::responses::{EmbedResponse, Embedding, EmbeddingVector, EmbeddingsResponse, Usage};
use super::{AppState, Body, parse, validate, validate_scores};
use crate::error::CallError;
use morph_encoder::pooling::cosine;

/// OpenAI's embeddings.
#[utoipa::path(post, path = "/v1/embeddings", operation_id = "embeddings", tag = "embeddings", request_body = EmbeddingsRequest,
    responses((status = 200, description = "A vector per input, in order.", body = EmbeddingsResponse)))]
pub(super) async fn openai(
    State(state): State<AppState>,
    Body(body): Body,
) -> Result<Json<EmbeddingsResponse>, CallError> {
    state
        .drain
        .or_deadline(async {
            let embedder = state.embedder()?;
            let model = &state.model;
            let call = validate::embeddings(parse(&body)?, state.max_client_batch, &model.names, model.dim)?;
            let out = embedder.embed(call.embed).await?;
            let data = out
                .vectors
                .into_iter()
                .enumerate()
                .map(|(index, vector)| Embedding {
                    object: "embedding",
                    index,
                    embedding: EmbeddingVector::encode(vector, call.encoding),
                })
                .collect();
            Ok(Json(EmbeddingsResponse {
                object: "list",
                data,
                model: state.model.name().to_string(),
                usage: Usage::of(out.tokens),
            }))
        })
        .await
}

/// text-embeddings-inference's embeddings.
#[utoipa::path(post, path = "/embed", operation_id = "embed", tag = "embeddings", request_body = EmbedRequest,
    responses((status = 200, description = "A vector per input, in order.", body = Vec<Vec<f32>>)))]
pub(super) async fn tei(
    State(state): State<AppState>,
    Body(body): Body,
) -> Result<Json<EmbedResponse>, CallError> {
    state
        .drain
        .or_deadline(async {
            let embedder = state.embedder()?;
            let request: EmbedRequest = parse(&body)?;
            Ok(Json(embedder.embed(validate::embed(request, state.max_client_batch)?).await?.vectors))
        })
        .await
}

/// text-embeddings-inference's sentence similarity: the cosine of each sentence with the source.
#[utoipa::path(post, path = "/similarity", tag = "embeddings", request_body = SimilarityRequest,
    responses((status = 200, description = "Per sentence, its cosine with the source sentence.",
        body = Vec<f32>)))]
pub(super) async fn similarity(
    State(state): State<AppState>,
    Body(body): Body,
) -> Result<Json<Vec<f32>>, CallError> {
    state
        .drain
        .or_deadline(async {
            let embedder = state.embedder()?;
            let call = validate_scores::similarity(parse(&body)?, state.max_client_batch)?;
            let vectors = embedder.embed(call).await?.vectors;
            let (source, sentences) = vectors
                .split_first()
                .ok_or_else(|| CallError::validation("inputs.source_sentence", "is required"))?;
            Ok(Json(sentences.iter().map(|v| cosine(source, v)).collect()))
        })
        .await
}
