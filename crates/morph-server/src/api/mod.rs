//! HTTP API: routes, shared state, and the embedding path common to both embedding formats.

mod classify;
mod embed;
mod generate;
mod info;
mod openai;
mod prefill;
mod tei;
pub mod validate;

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use morph_decoder::{GgufTokenizer, Llama};
use morph_encoder::tasks::served::TaskHeads;
use morph_encoder::{Pooling, TextTokenizer};

use subtle::ConstantTimeEq;

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
    /// `onnxruntime`, `candle`, `emulated`, `llama.cpp-decoder` or `candle-decoder`.
    pub engine: String,
    /// The longest input any runtime accepts.
    pub max_input_len: u32,
    /// A decoder cut into this many prefill stages: a completion is its one next token (0: a
    /// whole decoder, or an encoder).
    pub prefill_stages: u16,
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
    /// OTAS's task heads (`/v1/classify`), on a server of the encoder they read.
    pub heads: Option<Arc<TaskHeads>>,
    pub model: Arc<ServedModel>,
    pub api_key: Option<Arc<str>>,
    /// Most inputs in one call.
    pub max_client_batch: usize,
    /// The longest a client may take to send a request's body.
    pub body_timeout: std::time::Duration,
    pub started: Instant,
}

/// The largest request body read, in bytes.
pub const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// A request's raw body. One over [`MAX_BODY_BYTES`] (or one that cannot be read) is answered
/// as every error is: JSON, with its own type, counted in `/metrics`.
pub(super) struct Body(pub Bytes);

impl FromRequest<AppState> for Body {
    type Rejection = Response;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let read = tokio::time::timeout(state.body_timeout, Bytes::from_request(request, state)).await;
        let error = match read {
            Ok(Ok(bytes)) => return Ok(Body(bytes)),
            Err(_) => ApiError::BodyTimeout { seconds: state.body_timeout.as_secs_f64() },
            Ok(Err(rejection)) if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE => {
                ApiError::BodyTooLarge { limit: MAX_BODY_BYTES }
            }
            Ok(Err(rejection)) => {
                ApiError::MalformedJson(format!("the body could not be read: {}", rejection.body_text()))
            }
        };
        embed::record::<()>(state, Instant::now(), &Err(error.clone()));
        Err(error.into_response())
    }
}

/// `/health` and `/metrics` stay open; every other route needs the API key when one is set.
pub fn router(state: AppState) -> Router {
    let protected = Router::new()
        .route("/v1/embeddings", post(openai::embeddings))
        .route("/embed", post(tei::embed))
        .route("/v1/classify", post(classify::classify))
        .route("/predict", post(classify::predict))
        .route("/v1/completions", post(generate::completions))
        .route("/v1/chat/completions", post(generate::chat_completions))
        .route("/info", get(info::info))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_key));
    Router::new()
        .merge(protected)
        .route("/health", get(info::health))
        .route("/metrics", get(info::metrics))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

async fn require_key(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if let Some(key) = &state.api_key {
        let given = request.headers().get(AUTHORIZATION).and_then(|v| v.to_str().ok());
        let given = given.and_then(|v| v.strip_prefix("Bearer ")).unwrap_or_default();
        // Compared in constant time (for keys of equal length), so timing does not leak it.
        if !bool::from(given.as_bytes().ct_eq(key.as_bytes())) {
            embed::record::<()>(&state, Instant::now(), &Err(ApiError::Unauthorized));
            return ApiError::Unauthorized.into_response();
        }
    }
    next.run(request).await
}
