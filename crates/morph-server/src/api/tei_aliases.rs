//! text-embeddings-inference's other names for its routes, which its clients call
//! (`huggingface_hub.InferenceClient(base_url=URL)`, LangChain's `HuggingFaceEndpointEmbeddings`,
//! SageMaker): `POST /` and `POST /invocations` embed as `/embed` does (TEI answers them by the
//! served model's kind; Morph's embedding server's is embeddings), `POST /embeddings` is
//! `/v1/embeddings`, and `GET /` and `GET /ping` are readiness as `/ready` is.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;

use super::requests::{EmbedRequest, EmbeddingsRequest};
use super::responses::{EmbedResponse, EmbeddingsResponse, Health};
use super::{AppState, Body, embeddings, health};
use crate::error::CallError;

/// `/embed` at the root, as TEI serves an embedding model.
#[utoipa::path(post, path = "/", operation_id = "embed_root", tag = "embeddings", request_body = EmbedRequest,
    responses((status = 200, description = "As /embed.", body = Vec<Vec<f32>>)))]
pub(super) async fn root(state: State<AppState>, body: Body) -> Result<Json<EmbedResponse>, CallError> {
    embeddings::tei(state, body).await
}

/// `/embed` under SageMaker's name.
#[utoipa::path(post, path = "/invocations", operation_id = "invocations", tag = "embeddings",
    request_body = EmbedRequest, responses((status = 200, description = "As /embed.", body = Vec<Vec<f32>>)))]
pub(super) async fn invocations(
    state: State<AppState>,
    body: Body,
) -> Result<Json<EmbedResponse>, CallError> {
    embeddings::tei(state, body).await
}

/// `/v1/embeddings` under TEI's (and Infinity's) unversioned name.
#[utoipa::path(post, path = "/embeddings", operation_id = "embeddings_unversioned", tag = "embeddings",
    request_body = EmbeddingsRequest,
    responses((status = 200, description = "As /v1/embeddings.", body = EmbeddingsResponse)))]
pub(super) async fn openai(
    state: State<AppState>,
    body: Body,
) -> Result<Json<EmbeddingsResponse>, CallError> {
    embeddings::openai(state, body).await
}

/// Readiness at the root, as TEI answers `GET /`.
#[utoipa::path(get, path = "/", operation_id = "ready_root", tag = "operations", security(()),
    responses((status = 200, description = "Ready.", body = Health),
        (status = 503, description = "Not ready, and why.", body = Health)))]
pub(super) async fn ready_root(state: State<AppState>) -> (StatusCode, Json<Health>) {
    health::ready(state).await
}

/// Readiness under SageMaker's name.
#[utoipa::path(get, path = "/ping", operation_id = "ping", tag = "operations", security(()),
    responses((status = 200, description = "Ready.", body = Health),
        (status = 503, description = "Not ready, and why.", body = Health)))]
pub(super) async fn ping(state: State<AppState>) -> (StatusCode, Json<Health>) {
    health::ready(state).await
}
