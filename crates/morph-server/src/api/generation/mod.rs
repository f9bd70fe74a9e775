//! Generation on a decoder: OpenAI's chat completions and completions (whole or streamed, with
//! tools, JSON schemas and log-probabilities) and its Responses API.

mod answers;
mod completions;
mod logprobs;
mod reply;
mod requests;
mod response_object;
mod responses;
mod responses_stream;
mod stream;
mod tool_reply;
mod validate;
mod validate_output;
mod validate_responses;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;

/// The family's routes, each with its OpenAPI entry.
pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(completions::completions))
        .routes(routes!(completions::chat_completions))
        .routes(routes!(responses::create))
}
