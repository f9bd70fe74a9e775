//! `GET /v1/models` and `GET /v1/models/{id}` (OpenAI): the one model this server serves, by
//! the name its `model` fields take (`--served-model-name`, or the model's own).

use std::time::{SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::{Path, State};
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
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

fn served(state: &AppState) -> Model {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let created = now.saturating_sub(state.started.elapsed().as_secs());
    Model { id: state.model.name.clone(), object: "model", created, owned_by: "morph" }
}

/// The served model (OpenAI's list).
#[utoipa::path(get, path = "/v1/models", operation_id = "list_models", tag = "operations",
    responses((status = 200, description = "The one model served.", body = ModelList)))]
pub(super) async fn list(State(state): State<AppState>) -> Json<ModelList> {
    Json(ModelList { object: "list", data: vec![served(&state)] })
}

/// The served model by its name.
#[utoipa::path(get, path = "/v1/models/{id}", operation_id = "retrieve_model", tag = "operations",
    params(("id" = String, Path, description = "The served model's name.")),
    responses((status = 200, description = "The model.", body = Model)))]
pub(super) async fn one(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Model>, CallError> {
    match id == state.model.name {
        true => Ok(Json(served(&state))),
        false => Err(CallError::UnknownModel { asked: id, served: state.model.name.clone() }),
    }
}
