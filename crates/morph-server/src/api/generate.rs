//! `POST /v1/completions` and `POST /v1/chat/completions` in the OpenAI formats, on a server
//! started with a decoder. `max_tokens` (default 128), `temperature` (default 1; 0 is greedy),
//! `top_p`, `seed` (without one every call samples afresh), `stream` (server-sent events,
//! ending with `data: [DONE]`); `usage` counts prompt and completion tokens. A refusal by the
//! scheduler is a 429 (or 413 for a prompt no instance takes) before anything streams. A client
//! that goes away (a dropped connection, a stream closed early) cancels its generation: it stops
//! at the decoder's next iteration.

use std::time::Instant;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use morph_decoder::GenEvent;
use morph_engine::EngineError;

use super::reply::{Reply, observe_done};
use super::requests::GenerationRequest;
use super::responses::{CompletionResponse, GenerationUsage};
use super::{AppState, Body, parse, record, stream, validate};
use crate::error::ApiError;
use crate::infer::{Generation, GenerationFormat, Truth};
use crate::metrics::Metrics;

pub(super) async fn completions(State(state): State<AppState>, Body(body): Body) -> Response {
    serve(state, &body, GenerationFormat::Completion).await
}

pub(super) async fn chat_completions(State(state): State<AppState>, Body(body): Body) -> Response {
    serve(state, &body, GenerationFormat::Chat).await
}

async fn serve(state: AppState, body: &[u8], format: GenerationFormat) -> Response {
    let started = Instant::now();
    let (generation, streamed) = match start(&state, body, format).await {
        Ok(ok) => ok,
        Err(e) => {
            record::<()>(&state, started, &Err(e.clone()));
            return e.into_response();
        }
    };
    state.driver.metrics.time_to_first_token_seconds.observe(started.elapsed().as_secs_f64());
    let reply = Reply::new(format, state.model.name.clone());
    if streamed {
        record::<()>(&state, started, &Ok(()));
        return stream::events(generation, reply, state.driver.metrics.clone());
    }
    let result = whole(generation, &reply, &state.driver.metrics).await;
    record(&state, started, &result);
    match result {
        Ok(body) => Json(body).into_response(),
        Err(e) => e.into_response(),
    }
}

/// Checks the call and starts its generation; whether it streams.
async fn start(
    state: &AppState,
    body: &[u8],
    format: GenerationFormat,
) -> Result<(Generation, bool), ApiError> {
    let generator = state.generator()?;
    let request: GenerationRequest = parse(body)?;
    let call = validate::generation(request, format, &state.model.name, generator.context())?;
    let streamed = call.stream;
    Ok((generator.start(call).await?, streamed))
}

/// Collects a generation's tokens into one answer.
async fn whole(
    mut generation: Generation,
    reply: &Reply,
    metrics: &Metrics,
) -> Result<CompletionResponse, ApiError> {
    let first_at = Instant::now();
    let mut text = String::new();
    let mut event = generation.first;
    let result = loop {
        match event {
            GenEvent::Token { text: piece, .. } => text.push_str(&piece),
            GenEvent::Done { reason, prompt_tokens, cached_tokens, completion_tokens } => {
                observe_done(metrics, first_at, prompt_tokens, cached_tokens, completion_tokens);
                Truth::learn(&mut generation.truth, completion_tokens);
                let usage = GenerationUsage::new(prompt_tokens, cached_tokens, completion_tokens);
                break Ok(reply.whole(text, reason, usage));
            }
            GenEvent::Failed(e) => break Err(ApiError::Engine(e)),
            GenEvent::Dropped(r) => break Err(ApiError::generation_dropped(r)),
        }
        event = generation.events.recv().await.unwrap_or(GenEvent::Failed(EngineError::Stopped));
    };
    generation.claim.answered();
    result
}
