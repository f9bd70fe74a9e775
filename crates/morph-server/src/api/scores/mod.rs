//! Classification and reranking on an encoder: OTAS's tasks (`/v1/classify`, and `/predict` on
//! Morph's task heads), a sequence-classification checkpoint's own head (`/predict`), and a
//! cross-encoder's relevance (TEI's `/rerank`, Cohere's and Jina's `/v1/rerank`).

pub(super) mod answers;
pub(super) mod classify;
pub(super) mod pair_fields;
pub(super) mod requests;
pub(super) mod rerank;
pub(super) mod validate;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;

/// The family's routes, each with its OpenAPI entry.
pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(classify::classify))
        .routes(routes!(classify::predict))
        .routes(routes!(rerank::rerank))
        .routes(routes!(rerank::documents))
}
