//! `POST /v1/responses`: OpenAI's Responses API: the input (and `instructions`) rendered as a
//! chat by the model's template, one generation, its text as one output message (or, where the
//! call offered tools and the model called them, one `function_call` item per call), its token
//! counts as the Responses API names them ([`super::response_object`]); answered whole, or as the
//! API's event stream ([`super::responses_stream`]).

use std::time::Instant;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};

use super::completions::collect;
use super::requests::ResponsesRequest;
use super::response_object::{ResponseIds, ResponseObject};
use super::responses_stream;
use super::tool_reply::CallReader;
use crate::api::AppState;
use crate::api::opening::{Checked, Decoder};
use crate::error::CallError;
use crate::infer::GenerationFormat;

/// OpenAI's Responses API.
#[utoipa::path(post, path = "/v1/responses", tag = "generation", request_body = ResponsesRequest,
    responses((status = 200, description = "The response: one output message (or, with `stream`, \
        its server-sent events).",
        content((ResponseObject = "application/json"), (Value = "text/event-stream")))))]
pub(super) async fn create(
    State(state): State<AppState>,
    Decoder(generator): Decoder,
    Checked(call): Checked<ResponsesRequest>,
) -> Result<Response, CallError> {
    let started = Instant::now();
    let generation = generator.start(&call).await?.into_iter().next().ok_or(CallError::ShuttingDown)?;
    state.driver.metrics.time_to_first_token(started.elapsed().as_secs_f64());
    let ids = ResponseIds::new(state.model.name().to_string());
    let calls = CallReader::of(&call.output, &generator);
    if call.stream {
        return Ok(responses_stream::events(generation, ids, calls, &state));
    }
    let metrics = &state.driver.metrics;
    let (finished, usage) = collect(generation, GenerationFormat::Chat, &generator, metrics).await?;
    let answer = CallReader::answer(calls.as_ref(), finished.text);
    Ok(Json(ResponseObject::new(&ids, answer, finished.reason, usage)).into_response())
}
