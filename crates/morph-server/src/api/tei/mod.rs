//! text-embeddings-inference's own routes beside the shared ones: its other names for them (`/`,
//! `/invocations`, `/vertex`, `/embeddings`, `GET /` and `/ping`), its tokenizer (`/tokenize`,
//! `/decode`), and the two it has that Morph refuses by name (`/embed_sparse`, `/embed_all`).

mod aliases;
mod requests;
mod tokens;

use axum::routing::post;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;

/// The family's keyed routes, each with its OpenAPI entry (the two refusals have none).
pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(aliases::root))
        .routes(routes!(aliases::invocations))
        .routes(routes!(aliases::openai))
        .routes(routes!(aliases::vertex))
        .routes(routes!(tokens::tokenize))
        .routes(routes!(tokens::decode))
        .route("/embed_sparse", post(aliases::embed_sparse))
        .route("/embed_all", post(aliases::embed_all))
}

/// TEI's readiness probes, open as every probe is.
pub(super) fn open_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(aliases::ready_root)).routes(routes!(aliases::ping))
}
