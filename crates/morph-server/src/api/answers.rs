//! The answer types every route family shares: the error body and an encoder call's token counts.

use serde::Serialize;
use utoipa::ToSchema;

/// `{"error": {"message", "type"}}`, the OpenAI shape, on every route.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ErrorResponse {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ErrorDetail {
    pub message: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
}

/// Token counts of an embedding or classification call.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Usage {
    pub prompt_tokens: usize,
    pub total_tokens: usize,
}

impl Usage {
    pub(crate) fn of(tokens: usize) -> Self {
        Self { prompt_tokens: tokens, total_tokens: tokens }
    }
}
