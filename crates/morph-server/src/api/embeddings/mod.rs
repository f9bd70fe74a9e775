//! Embeddings in two formats: `POST /v1/embeddings` (OpenAI: `input` strings or token ids,
//! vectors always L2-normalised, as numbers or base64; Morph's extension `"truncate": true` cuts
//! long inputs) and `POST /embed` (text-embeddings-inference: `inputs`, `normalize` default
//! true, `truncate` default false; an array of vectors); and TEI's `POST /similarity` on them.

pub(super) mod answers;
pub(super) mod requests;
mod validate;

use axum::Json;
use axum::extract::State;
use morph_encoder::pooling::cosine;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::answers::Usage;
use super::opening::{Checked, Encoder};
use crate::error::CallError;
use answers::{EmbedResponse, Embedding, EmbeddingVector, EmbeddingsResponse};
use requests::{EmbedRequest, EmbeddingsRequest, SimilarityRequest};

/// The family's routes, each with its OpenAPI entry.
pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(openai)).routes(routes!(tei)).routes(routes!(similarity))
}

/// OpenAI's embeddings.
#[utoipa::path(post, path = "/v1/embeddings", operation_id = "embeddings", tag = "embeddings", request_body = EmbeddingsRequest,
    responses((status = 200, description = "A vector per input, in order.", body = EmbeddingsResponse)))]
pub(super) async fn openai(
    State(state): State<AppState>,
    Encoder(embedder): Encoder,
    Checked(call): Checked<EmbeddingsRequest>,
) -> Result<Json<EmbeddingsResponse>, CallError> {
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
}

/// text-embeddings-inference's embeddings.
#[utoipa::path(post, path = "/embed", operation_id = "embed", tag = "embeddings", request_body = EmbedRequest,
    responses((status = 200, description = "A vector per input, in order.", body = Vec<Vec<f32>>)))]
pub(super) async fn tei(
    Encoder(embedder): Encoder,
    Checked(call): Checked<EmbedRequest>,
) -> Result<Json<EmbedResponse>, CallError> {
    Ok(Json(embedder.embed(call).await?.vectors))
}

/// text-embeddings-inference's sentence similarity: the cosine of each sentence with the source.
#[utoipa::path(post, path = "/similarity", tag = "embeddings", request_body = SimilarityRequest,
    responses((status = 200, description = "Per sentence, its cosine with the source sentence.",
        body = Vec<f32>)))]
pub(super) async fn similarity(
    Encoder(embedder): Encoder,
    Checked(call): Checked<SimilarityRequest>,
) -> Result<Json<Vec<f32>>, CallError> {
    let vectors = embedder.embed(call).await?.vectors;
    let (source, sentences) = vectors
        .split_first()
        .ok_or_else(|| CallError::validation("inputs.source_sentence", "is required"))?;
    Ok(Json(sentences.iter().map(|v| cosine(source, v)).collect()))
}
