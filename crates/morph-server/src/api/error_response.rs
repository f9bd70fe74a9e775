//! [`CallError`]'s single mapping to HTTP: its status code, and the body every endpoint
//! answers a failure with, `{"error": {"message": "...", "type": "..."}}` (the OpenAI shape).

use axum::Json;
use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use morph_engine::EngineError;

use super::answers::{ErrorDetail, ErrorResponse};
use crate::error::CallError;

impl CallError {
    pub fn status(&self) -> StatusCode {
        match self {
            CallError::MalformedJson(_) => StatusCode::BAD_REQUEST,
            CallError::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            CallError::BodyTimeout { .. } => StatusCode::REQUEST_TIMEOUT,
            CallError::Validation { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            CallError::TooLong { .. } | CallError::PromptTooLong { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            CallError::UnknownModel { .. } | CallError::UnknownTask { .. } => StatusCode::NOT_FOUND,
            CallError::Overloaded(_) => StatusCode::TOO_MANY_REQUESTS,
            CallError::DeadlineUnreachable(_) => StatusCode::GATEWAY_TIMEOUT,
            CallError::Unauthorized => StatusCode::UNAUTHORIZED,
            CallError::Engine(EngineError::Stopped) => StatusCode::SERVICE_UNAVAILABLE,
            CallError::Engine(_) => StatusCode::INTERNAL_SERVER_ERROR,
            CallError::WrongEndpoint { .. } => StatusCode::NOT_FOUND,
            CallError::ShuttingDown | CallError::Starting(_) => StatusCode::SERVICE_UNAVAILABLE,
            CallError::NotFound(_) => StatusCode::NOT_FOUND,
            CallError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
        }
    }
}

/// Seconds an overloaded (429), starting or shutting-down (503) server asks a client to wait before it
/// tries again (`Retry-After`).
const RETRY_AFTER_S: u32 = 1;

impl IntoResponse for CallError {
    fn into_response(self) -> Response {
        let error = ErrorDetail { message: self.to_string(), kind: self.kind().label() };
        let mut response = (self.status(), Json(ErrorResponse { error })).into_response();
        // What the call metrics count the failure as (see `api::observe_calls`).
        response.extensions_mut().insert(self.kind());
        if matches!(self, CallError::Overloaded(_) | CallError::ShuttingDown | CallError::Starting(_)) {
            response.headers_mut().insert(RETRY_AFTER, HeaderValue::from(RETRY_AFTER_S));
        }
        response
    }
}
