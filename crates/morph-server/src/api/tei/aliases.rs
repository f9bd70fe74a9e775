//! text-embeddings-inference's other names for its routes, which its clients call
//! (`huggingface_hub.InferenceClient(base_url=URL)`, LangChain's `HuggingFaceEndpointEmbeddings`,
//! SageMaker, Vertex AI): `POST /` and `POST /invocations` answer by the served model's kind as
//! TEI does (an embedding model as `/embed`, a classifier as `/predict`, a reranker as
//! `/rerank`), `POST /vertex` answers each of its `instances` so, `POST /embeddings` is
//! `/v1/embeddings`, and `GET /` and `GET /ping` are readiness as `/ready` is. `/embed_sparse`
//! and `/embed_all` are refused by name: Morph serves no sparse model and no
//! per-token vectors.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use futures_util::future::try_join_all;
use serde::Serialize;
use serde_json::value::{RawValue, to_raw_value};

use super::requests::{VertexRequest, VertexResponse};
use crate::api::embeddings::answers::EmbeddingsResponse;
use crate::api::embeddings::requests::EmbeddingsRequest;
use crate::api::opening::{Checked, Encoder};
use crate::api::operations::health::{self, Health};
use crate::api::scores::{classify, rerank};
use crate::api::{AppState, Body, embeddings, parse};
use crate::error::CallError;
use crate::infer::ModelKind;

/// A handler's answer as the JSON text the route writes (an f32 taken through a JSON value would
/// be written with an f64's digits).
fn value<T: Serialize>(answer: Result<Json<T>, CallError>) -> Result<Box<RawValue>, CallError> {
    to_raw_value(&answer?.0).map_err(|e| CallError::MalformedJson(e.to_string()))
}

/// `body` answered by the route of the served model's kind.
async fn by_kind(state: &AppState, body: Bytes) -> Result<Box<RawValue>, CallError> {
    let encoder = Encoder(state.embedder()?.clone());
    match encoder.0.kind() {
        // TEI's root takes a similarity body too, known by its inputs' source sentence.
        ModelKind::Embedding if is_similarity(&body) => {
            value(embeddings::similarity(encoder, Checked::of(&body, state)?).await)
        }
        ModelKind::Embedding => value(embeddings::tei(encoder, Checked::of(&body, state)?).await),
        ModelKind::Classifier => value(classify::predict(encoder, Checked::of(&body, state)?).await),
        ModelKind::Reranker => value(rerank::rerank(encoder, Checked::of(&body, state)?).await),
    }
}

/// Whether `body` is `/similarity`'s (`inputs` an object with a `source_sentence`).
fn is_similarity(body: &[u8]) -> bool {
    let value: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    value.is_some_and(|v| v.pointer("/inputs/source_sentence").is_some())
}

/// The served model's route at the root, as TEI serves it.
#[utoipa::path(post, path = "/", operation_id = "by_kind_root", tag = "embeddings",
    request_body(content = Object, description = "As /embed, /similarity, /predict or /rerank, by the served model's kind."),
    responses((status = 200, description = "As /embed, /similarity, /predict or /rerank.", body = Value)))]
pub(super) async fn root(
    State(state): State<AppState>,
    Body(body): Body,
) -> Result<Json<Box<RawValue>>, CallError> {
    by_kind(&state, body).await.map(Json)
}

/// The served model's route under SageMaker's name.
#[utoipa::path(post, path = "/invocations", operation_id = "invocations", tag = "embeddings",
    request_body(content = Object, description = "As /embed, /similarity, /predict or /rerank, by the served model's kind."),
    responses((status = 200, description = "As /embed, /similarity, /predict or /rerank.", body = Value)))]
pub(super) async fn invocations(
    state: State<AppState>,
    body: Body,
) -> Result<Json<Box<RawValue>>, CallError> {
    root(state, body).await
}

/// Vertex AI's prediction: each instance answered as `POST /` answers it, all at once (so
/// that the policy may batch them); one failing fails the call.
#[utoipa::path(post, path = "/vertex", operation_id = "vertex", tag = "embeddings", request_body = VertexRequest,
    responses((status = 200, description = "Each instance's answer, in order.", body = VertexResponse)))]
pub(super) async fn vertex(
    State(state): State<AppState>,
    Body(body): Body,
) -> Result<Json<VertexResponse>, CallError> {
    let request: VertexRequest = parse(&body)?;
    let Some(instances) = request.instances.filter(|i| !i.is_empty()) else {
        return Err(CallError::validation("instances", "must be a non-empty array of request bodies"));
    };
    if instances.len() > state.max_client_batch {
        let message = format!("has {} items; at most {} per call", instances.len(), state.max_client_batch);
        return Err(CallError::validation("instances", message));
    }
    let bodies = instances.iter().map(|i| Bytes::from(i.to_string()));
    let predictions = try_join_all(bodies.map(|b| by_kind(&state, b))).await?;
    Ok(Json(VertexResponse { predictions }))
}

/// `/v1/embeddings` under TEI's (and Infinity's) unversioned name.
#[utoipa::path(post, path = "/embeddings", operation_id = "embeddings_unversioned", tag = "embeddings",
    request_body = EmbeddingsRequest,
    responses((status = 200, description = "As /v1/embeddings.", body = EmbeddingsResponse)))]
pub(super) async fn openai(
    state: State<AppState>,
    encoder: Encoder,
    call: Checked<EmbeddingsRequest>,
) -> Result<Json<EmbeddingsResponse>, CallError> {
    embeddings::openai(state, encoder, call).await
}

/// TEI's sparse (SPLADE) embeddings, which no model Morph loads gives.
pub(super) async fn embed_sparse() -> CallError {
    CallError::NotFound(
        "/embed_sparse is not served: Morph loads no sparse (SPLADE) model; /embed and /v1/embeddings \
         give dense vectors"
            .into(),
    )
}

/// text-embeddings-inference's token-level embeddings, which Morph does not serve.
pub(super) async fn embed_all() -> CallError {
    CallError::NotFound(
        "/embed_all (one vector per token) is not served: Morph's graphs pool inside the engine; \
         /embed and /v1/embeddings give one vector per input"
            .into(),
    )
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
