//! Running the server: the models served, `/info`, the probes, `/metrics` and the API's document.

pub(super) mod health;
mod info;
mod models;
pub(super) mod openapi;

use axum::routing::get;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;

/// The keyed routes, each with its OpenAPI entry.
pub(super) fn keyed_routes() -> OpenApiRouter<AppState> {
    let mut router = OpenApiRouter::new().routes(routes!(info::info)).routes(routes!(models::list));
    // A model's name may hold slashes (`org/name`): its route takes the rest of the path, where
    // the document names it `{id}`.
    let (schemas, paths, _) = routes!(models::one);
    let document = router.get_openapi_mut();
    document.paths.merge(paths);
    document.components.get_or_insert_with(Default::default).schemas.extend(schemas);
    router.route("/v1/models/{*id}", get(models::one))
}

/// The probes, the scrape and the document: open, even with an API key.
pub(super) fn open_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(health::health))
        .routes(routes!(health::ready))
        .routes(routes!(health::live))
        .routes(routes!(info::metrics))
        .routes(routes!(openapi::document))
}
