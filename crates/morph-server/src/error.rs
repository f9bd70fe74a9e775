//! API errors and their single mapping to HTTP status codes. Every error body is
//! `{"error": {"message": "...", "type": "..."}}` (the OpenAI shape) on every endpoint.

use crate::api::responses::{ErrorDetail, ErrorResponse};
use axum::Json;
use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use morph_core::DropReason;
use morph_engine::EngineError;

use crate::metrics::FailureKind;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    #[error("malformed JSON body: {0}")]
    MalformedJson(String),
    #[error("the request body is larger than the limit of {limit} bytes")]
    BodyTooLarge { limit: usize },
    #[error("the request body did not arrive within {seconds} s")]
    BodyTimeout { seconds: f64 },
    /// A field is missing, of the wrong type or out of bounds; the message names the field.
    #[error("{field}: {message}")]
    Validation { field: String, message: String },
    #[error(
        "{field} has {len} tokens, more than the longest runtime accepts ({max_len}); \
         send \"truncate\": true to cut it"
    )]
    TooLong { field: String, len: usize, max_len: u32 },
    #[error("the prompt has {len} tokens, more than the decoder's runtime takes ({max_len})")]
    PromptTooLong { len: u32, max_len: u32 },
    #[error("model '{asked}' is not served here; this server serves '{served}'")]
    UnknownModel { asked: String, served: String },
    #[error("task '{asked}' is not served here; the tasks served: {served}")]
    UnknownTask { asked: String, served: String },
    #[error("overloaded: {0}")]
    Overloaded(DropReason),
    #[error("given up: {0}")]
    DeadlineUnreachable(DropReason),
    #[error("missing or wrong API key: send the header 'Authorization: Bearer <key>'")]
    Unauthorized,
    #[error("{0}")]
    Engine(EngineError),
    #[error("this server serves {served}")]
    WrongEndpoint { served: &'static str },
    #[error("the server is shutting down and its drain deadline passed before this call finished")]
    ShuttingDown,
    /// A route this server does not have; the message says why or lists the routes it has.
    #[error("{0}")]
    NotFound(String),
}

impl ApiError {
    pub fn validation(field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError::Validation { field: field.into(), message: message.into() }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::MalformedJson(_) => StatusCode::BAD_REQUEST,
            ApiError::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::BodyTimeout { .. } => StatusCode::REQUEST_TIMEOUT,
            ApiError::Validation { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::TooLong { .. } | ApiError::PromptTooLong { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnknownModel { .. } | ApiError::UnknownTask { .. } => StatusCode::NOT_FOUND,
            ApiError::Overloaded(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::DeadlineUnreachable(_) => StatusCode::GATEWAY_TIMEOUT,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::Engine(EngineError::Stopped) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Engine(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::WrongEndpoint { .. } => StatusCode::NOT_FOUND,
            ApiError::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
        }
    }

    pub fn kind(&self) -> FailureKind {
        match self {
            ApiError::MalformedJson(_) | ApiError::Validation { .. } => FailureKind::Validation,
            ApiError::BodyTooLarge { .. } => FailureKind::BodyTooLarge,
            ApiError::BodyTimeout { .. } => FailureKind::BodyTimeout,
            ApiError::TooLong { .. } | ApiError::PromptTooLong { .. } => FailureKind::TooLong,
            ApiError::UnknownModel { .. } => FailureKind::UnknownModel,
            ApiError::UnknownTask { .. } => FailureKind::UnknownTask,
            ApiError::Overloaded(_) => FailureKind::Overloaded,
            ApiError::DeadlineUnreachable(_) => FailureKind::Deadline,
            ApiError::Unauthorized => FailureKind::Unauthorized,
            ApiError::Engine(_) => FailureKind::Engine,
            ApiError::WrongEndpoint { .. } => FailureKind::WrongEndpoint,
            ApiError::ShuttingDown => FailureKind::ShuttingDown,
            ApiError::NotFound(_) => FailureKind::NotFound,
        }
    }
}

impl ApiError {
    /// A generation the policy gave up on: as any other, but a prompt no instance takes is
    /// named as a prompt (generation has no `truncate`).
    pub fn generation_dropped(reason: DropReason) -> Self {
        match reason {
            DropReason::NoRuntimeFits { len, max_len } => ApiError::PromptTooLong { len, max_len },
            other => other.into(),
        }
    }
}

impl From<DropReason> for ApiError {
    fn from(reason: DropReason) -> Self {
        match reason {
            DropReason::NoRuntimeFits { len, max_len } => {
                ApiError::TooLong { field: "input".into(), len: len as usize, max_len }
            }
            DropReason::DeadlineUnreachable { .. } => ApiError::DeadlineUnreachable(reason),
            DropReason::QueueFull { .. } => ApiError::Overloaded(reason),
        }
    }
}

/// Seconds an overloaded (429) or shutting-down (503) server asks a client to wait before it
/// tries again (`Retry-After`).
pub const RETRY_AFTER_S: u32 = 1;

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let error = ErrorDetail { message: self.to_string(), kind: self.kind().label() };
        let mut response = (self.status(), Json(ErrorResponse { error })).into_response();
        // What the call metrics count the failure as (see `api::observe_calls`).
        response.extensions_mut().insert(self.kind());
        if matches!(self, ApiError::Overloaded(_) | ApiError::ShuttingDown) {
            response.headers_mut().insert(RETRY_AFTER, HeaderValue::from(RETRY_AFTER_S));
        }
        response
    }
}
