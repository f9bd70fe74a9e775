//! `POST /v1/responses`: OpenAI's Responses API for text, answered whole: the input (and
//! `instructions`) rendered as a chat by the model's template, one generation, its text as one
//! output message, its token counts as the Responses API names them. A streamed response is
//! refused by name (see [`super::validate_responses`]).

use std::time::Instant;

use axum::Json;
use axum::extract::State;
use morph_decoder::FinishReason;
use serde::Serialize;
use utoipa::ToSchema;

use super::generate::collect;
use super::reply::{Finished, unix_nanos};
use super::requests::ResponsesRequest;
use super::responses::GenerationUsage;
use super::{AppState, Body, parse, validate_responses};
use crate::error::CallError;
use crate::infer::GenerationFormat;

/// A whole response.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ResponseObject {
    id: String,
    object: &'static str,
    created_at: u64,
    /// `completed`, or `incomplete` when the token limit cut it.
    status: &'static str,
    incomplete_details: Option<IncompleteDetails>,
    model: String,
    output: Vec<OutputMessage>,
    usage: ResponseUsage,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct IncompleteDetails {
    reason: &'static str,
}

/// The assistant's message.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct OutputMessage {
    #[serde(rename = "type")]
    kind: &'static str,
    id: String,
    status: &'static str,
    role: &'static str,
    content: Vec<OutputText>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct OutputText {
    #[serde(rename = "type")]
    kind: &'static str,
    text: String,
    annotations: Vec<String>,
}

/// Token counts, as the Responses API names them.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ResponseUsage {
    input_tokens: usize,
    input_tokens_details: CachedInput,
    output_tokens: usize,
    output_tokens_details: Reasoning,
    total_tokens: usize,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct CachedInput {
    cached_tokens: usize,
}

/// No reasoning tokens: the models served answer directly.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Reasoning {
    reasoning_tokens: usize,
}

impl ResponseObject {
    fn new(model: String, finished: Finished, usage: GenerationUsage) -> Self {
        let now = unix_nanos();
        let cut = finished.reason == FinishReason::Length;
        let message = OutputMessage {
            kind: "message",
            id: format!("msg_{now}"),
            status: if cut { "incomplete" } else { "completed" },
            role: "assistant",
            content: vec![OutputText { kind: "output_text", text: finished.text, annotations: Vec::new() }],
        };
        Self {
            id: format!("resp_{now}"),
            object: "response",
            created_at: (now / 1_000_000_000) as u64,
            status: if cut { "incomplete" } else { "completed" },
            incomplete_details: cut.then_some(IncompleteDetails { reason: "max_output_tokens" }),
            model,
            output: vec![message],
            usage: ResponseUsage {
                input_tokens: usage.prompt_tokens,
                input_tokens_details: CachedInput {
                    cached_tokens: usage.prompt_tokens_details.cached_tokens,
                },
                output_tokens: usage.completion_tokens,
                output_tokens_details: Reasoning { reasoning_tokens: 0 },
                total_tokens: usage.total_tokens,
            },
        }
    }
}

/// OpenAI's Responses API, for text.
#[utoipa::path(post, path = "/v1/responses", tag = "generation", request_body = ResponsesRequest,
    responses((status = 200, description = "The response: one output message.", body = ResponseObject)))]
pub(super) async fn create(
    State(state): State<AppState>,
    Body(body): Body,
) -> Result<Json<ResponseObject>, CallError> {
    let started = Instant::now();
    state
        .drain
        .or_deadline(async {
            let generator = state.generator()?;
            let request: ResponsesRequest = parse(&body)?;
            let call = validate_responses::responses(request, &state.model.names, generator.context())?;
            let generation =
                generator.start(&call).await?.into_iter().next().ok_or(CallError::ShuttingDown)?;
            state.driver.metrics.time_to_first_token(started.elapsed().as_secs_f64());
            let metrics = &state.driver.metrics;
            let (finished, usage) = collect(generation, GenerationFormat::Chat, generator, metrics).await?;
            Ok(Json(ResponseObject::new(state.model.name().to_string(), finished, usage)))
        })
        .await
}
