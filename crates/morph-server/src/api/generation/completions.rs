//! `POST /v1/completions` and `POST /v1/chat/completions` in the OpenAI formats, on a server
//! started with a decoder: the fields honoured are in [`super::requests::GenerationRequest`]
//! (and docs/api.md); `n` choices per prompt run as generations of their own; `usage` counts
//! each prompt's tokens once, as OpenAI does, and the completion tokens of every choice. A refusal by the scheduler is a 429 (or 413
//! for a prompt no instance takes) before anything streams. A client
//! that goes away (a dropped connection, a stream closed early) cancels its generation: it stops
//! at the decoder's next iteration.

use std::time::Instant;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use futures_util::future::try_join_all;
use morph_decoder::GenEvent;
use morph_engine::EngineError;

use super::answers::{CompletionResponse, GenerationUsage};
use super::logprobs::{ChoiceLogprobs, Logprobbed};
use super::reply::{Finished, Reply, choice_done};
use super::requests::{ChatRequest, CompletionRequest};
use super::tool_reply::CallReader;
use super::{stream, validate};
use crate::api::opening::Decoder;
use crate::api::{AppState, Body};
use crate::error::CallError;
use crate::infer::{GenerationFormat, Generator, StartedGeneration, ValidGeneration};
use crate::metrics::Metrics;

/// OpenAI's completions.
#[utoipa::path(post, path = "/v1/completions", tag = "generation", request_body = CompletionRequest,
    responses((status = 200, description = "The choices; with \"stream\": true, server-sent events \
        of chunks of this shape, ending with `data: [DONE]`.",
        content((CompletionResponse = "application/json"), (Value = "text/event-stream")))))]
pub(super) async fn completions(state: State<AppState>, decoder: Decoder, Body(body): Body) -> Response {
    serve(state, decoder, &body, GenerationFormat::Completion).await
}

/// OpenAI's chat completions.
#[utoipa::path(post, path = "/v1/chat/completions", tag = "generation", request_body = ChatRequest,
    responses((status = 200, description = "The choices; with \"stream\": true, server-sent events \
        of chunks of this shape, ending with `data: [DONE]`.",
        content((CompletionResponse = "application/json"), (Value = "text/event-stream")))))]
pub(super) async fn chat_completions(state: State<AppState>, decoder: Decoder, Body(body): Body) -> Response {
    serve(state, decoder, &body, GenerationFormat::Chat).await
}

async fn serve(
    State(state): State<AppState>,
    Decoder(generator): Decoder,
    body: &[u8],
    format: GenerationFormat,
) -> Response {
    let started = Instant::now();
    let (generations, call) = match start(&state, &generator, body, format).await {
        Ok(ok) => ok,
        Err(e) => return e.into_response(),
    };
    state.driver.metrics.time_to_first_token(started.elapsed().as_secs_f64());
    let calls = CallReader::of(&call.output, &generator);
    let reply = Reply::new(format, state.model.name().to_string(), calls);
    if call.stream {
        return stream::events(generations, reply, call.include_usage, call.n as usize, &state);
    }
    match whole(generations, &reply, call.n as usize, &generator, &state.driver.metrics).await {
        Ok(body) => Json(body).into_response(),
        Err(e) => e.into_response(),
    }
}

/// Checks the call (its body read as `format` asks) and starts its generations.
async fn start(
    state: &AppState,
    generator: &Generator,
    body: &[u8],
    format: GenerationFormat,
) -> Result<(Vec<StartedGeneration>, ValidGeneration), CallError> {
    let request = validate::generation_request(body, format)?;
    let context = generator.context();
    let call = validate::generation(request, format, &state.model.names, context, state.max_client_batch)?;
    Ok((generator.start(&call).await?, call))
}

/// Collects every choice's tokens into one answer (`n` choices a prompt); the first to fail fails
/// the call (and the others are cancelled).
async fn whole(
    generations: Vec<StartedGeneration>,
    reply: &Reply,
    n: usize,
    generator: &Generator,
    metrics: &Metrics,
) -> Result<CompletionResponse, CallError> {
    let format = reply.format();
    let finished =
        try_join_all(generations.into_iter().map(|g| collect(g, format, generator, metrics))).await?;
    let usage = (finished.iter().enumerate())
        .fold(GenerationUsage::default(), |sum, (choice, (_, usage))| sum.add(usage.of_choice(choice, n)));
    Ok(reply.whole(finished.into_iter().map(|(choice, _)| choice).collect(), usage))
}

/// One choice's answer (after its prompt, where the call echoes it) and usage.
pub(super) async fn collect(
    mut generation: StartedGeneration,
    format: GenerationFormat,
    generator: &Generator,
    metrics: &Metrics,
) -> Result<(Finished, GenerationUsage), CallError> {
    let first_at = Instant::now();
    let mut text = generation.echo.as_ref().map(|echo| echo.text.clone()).unwrap_or_default();
    let mut tokens = Vec::new();
    let mut event = generation.first;
    let result = loop {
        match event {
            GenEvent::PromptLogprobs(scored) => {
                let prompt = generation.echo.as_ref().map_or(&[][..], |echo| &echo.tokens);
                tokens.extend(Logprobbed::prompt(generator, prompt, &scored));
            }
            GenEvent::Token { id, text: piece, logprob } => {
                text.push_str(&piece);
                tokens.extend(logprob.map(|lp| Logprobbed::new(generator, id, &lp)));
            }
            GenEvent::Done { reason, tail, prompt_tokens, cached_tokens, completion_tokens } => {
                let counts = (prompt_tokens, cached_tokens, completion_tokens);
                let usage = choice_done(metrics, first_at, (&mut generation.truth, reason), counts);
                text.push_str(&tail);
                let asked = !tokens.is_empty();
                let logprobs = asked.then(|| ChoiceLogprobs::of(format, tokens, 0));
                break Ok((Finished { text, reason, logprobs }, usage));
            }
            GenEvent::Failed(e) => break Err(CallError::Engine(e)),
            GenEvent::Dropped(r) => break Err(CallError::generation_dropped(r)),
        }
        event = generation.events.recv().await.unwrap_or(GenEvent::Failed(EngineError::Stopped));
    };
    generation.claim.answered();
    result
}
