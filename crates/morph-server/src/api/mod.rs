//! HTTP API: routes, shared state, and the embedding path common to both embedding formats.

mod embed;
mod generate;
mod info;
mod openai;
mod tei;
pub mod validate;

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use morph_engine::decoder::{GgufTokenizer, Llama};
use morph_engine::{Pooling, TextTokenizer};

use crate::driver::Driver;
use crate::error::ApiError;
use crate::prediction::Predictions;

/// What `/info` reports about the deployment.
#[derive(Debug, Clone)]
pub struct ServedModel {
    pub name: String,
    pub dim: usize,
    /// `None` for a decoder.
    pub pooling: Option<Pooling>,
    /// `onnxruntime`, `candle`, `emulated` or `candle-decoder`.
    pub engine: String,
    /// The longest input any runtime accepts.
    pub max_input_len: u32,
}

#[derive(Debug, Clone)]
pub struct AppState {
    pub driver: Arc<Driver>,
    /// The encoder's tokenizer (embedding servers).
    pub tokenizer: Option<Arc<TextTokenizer>>,
    /// The decoder and its tokenizer (generation servers).
    pub generator: Option<Arc<(Llama, GgufTokenizer)>>,
    /// Predicted output lengths for the scheduler (generation servers with a predictor).
    pub predictions: Option<Arc<Predictions>>,
    pub model: Arc<ServedModel>,
    pub api_key: Option<Arc<str>>,
    /// Most inputs in one call.
    pub max_client_batch: usize,
    pub started: Instant,
}

/// `/health` and `/metrics` stay open; every other route needs the API key when one is set.
pub fn router(state: AppState) -> Router {
    let protected = Router::new()
        .route("/v1/embeddings", post(openai::embeddings))
        .route("/embed", post(tei::embed))
        .route("/v1/completions", post(generate::completions))
        .route("/v1/chat/completions", post(generate::chat_completions))
        .route("/info", get(info::info))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_key));
    Router::new()
        .merge(protected)
        .route("/health", get(info::health))
        .route("/metrics", get(info::metrics))
        .with_state(state)
}

async fn require_key(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if let Some(key) = &state.api_key {
        let given = request.headers().get(AUTHORIZATION).and_then(|v| v.to_str().ok());
        if given.and_then(|v| v.strip_prefix("Bearer ")) != Some(key.as_ref()) {
            state.driver.metrics.fail(ApiError::Unauthorized.kind());
            return ApiError::Unauthorized.into_response();
        }
    }
    next.run(request).await
}
