//! `GET /v1/models` and `GET /v1/models/{id}` (OpenAI): the one model this server serves, by
//! the name its `model` fields take (`--served-model-name`, or the model's own).

use axum::Json;
use axum::extract::{Path, State};
use serde::Serialize;
use utoipa::ToSchema;

use crate::api::AppState;
use crate::error::CallError;

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ModelList {
    object: &'static str,
    data: Vec<Model>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Model {
    id: String,
    object: &'static str,
    /// When this server started serving it (Unix seconds).
    created: u64,
    owned_by: &'static str,
}

/// The model under `name`.
fn served(state: &AppState, name: &str) -> Model {
    Model { id: name.to_string(), object: "model", created: state.model.created, owned_by: "morph" }
}

/// The served model (OpenAI's list).
#[utoipa::path(get, path = "/v1/models", operation_id = "list_models", tag = "operations",
    responses((status = 200, description = "The one model served.", body = ModelList)))]
pub(super) async fn list(State(state): State<AppState>) -> Json<ModelList> {
    Json(ModelList {
        object: "list",
        data: state.model.names.iter().map(|name| served(&state, name)).collect(),
    })
}

/// The served model by its name.
#[utoipa::path(get, path = "/v1/models/{id}", operation_id = "retrieve_model", tag = "operations",
    params(("id" = String, Path, description = "The served model's name.")),
    responses((status = 200, description = "The model.", body = Model)))]
pub(super) async fn one(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Model>, CallError> {
    match state.model.names.contains(&id) {
        true => Ok(Json(served(&state, &id))),
        false => Err(CallError::unknown_model(id, &state.model.names)),
    }
}
