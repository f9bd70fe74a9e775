//! `POST /v1/completions` and `POST /v1/chat/completions` in the OpenAI formats, on a server
//! started with a decoder. `max_tokens` (default 128), `temperature` (default 1; 0 is greedy),
//! `top_p`, `seed` (without one every call samples afresh), `stream` (server-sent events,
//! ending with `data: [DONE]`); `usage` counts prompt and completion tokens. A refusal by the scheduler is a 429 (or 413 for a prompt no
//! instance takes) before anything streams. A client that goes away (a dropped connection, a
//! stream closed early) cancels its generation: it stops at the decoder's next iteration.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::State;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use morph_decoder::{FinishReason, GenEvent, GgufTokenizer, Llama, Message, SamplingParams, chatml_prompt};
use morph_encoder::predictor::predictor_text;
use morph_engine::EngineError;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

use super::embed::record;
use super::{AppState, Body};
use super::{prefill, validate};
use crate::driver::Claim;
use crate::error::ApiError;
use crate::prediction::Predictions;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Completion,
    Chat,
}

pub(super) async fn completions(State(state): State<AppState>, Body(body): Body) -> Response {
    serve(state, &body, Format::Completion).await
}

pub(super) async fn chat_completions(State(state): State<AppState>, Body(body): Body) -> Response {
    serve(state, &body, Format::Chat).await
}

pub(super) struct Request {
    pub(super) prompt: Vec<u32>,
    pub(super) max_tokens: u32,
    pub(super) sampling: SamplingParams,
    stream: bool,
    /// Where its true output length is remembered when it finishes (with a predictor).
    truth: Option<Truth>,
}

/// A generation's predictor input, to cache its true output length under (SSJF §6).
struct Truth {
    predictions: Arc<Predictions>,
    text: String,
}

impl Truth {
    /// Remembers the length, once: the caller's slot is emptied.
    fn learn(truth: &mut Option<Truth>, completion_tokens: usize) {
        if let Some(t) = truth.take() {
            t.predictions.learn(t.text, completion_tokens as u32);
        }
    }
}

/// A generation under way: its request, the caller's claim, its events and the first of them.
pub(super) type Started = (Request, Claim, UnboundedReceiver<GenEvent>, GenEvent);

async fn serve(state: AppState, body: &[u8], format: Format) -> Response {
    let started = Instant::now();
    let result = start(&state, body, format).await;
    let (mut request, claim, mut rx, first) = match result {
        Ok(ok) => ok,
        Err(e) => {
            record::<()>(&state, started, &Err(e.clone()));
            return e.into_response();
        }
    };
    let metrics = state.driver.metrics.clone();
    metrics.time_to_first_token_seconds.observe(started.elapsed().as_secs_f64());
    let reply = Reply { format, id: format!("cmpl-{}", unix_nanos()), model: state.model.name.clone() };
    if request.stream {
        record::<()>(&state, started, &Ok(()));
        // The claim travels with the stream: dropped with it before the end, it cancels.
        let events = stream::unfold(
            (Some(first), rx, reply, Instant::now(), Some(claim), request.truth),
            move |(next, mut rx, reply, first_at, mut claim, mut truth)| {
                let metrics = metrics.clone();
                async move {
                    claim.as_ref()?;
                    let event = match next {
                        Some(e) => e,
                        None => rx.recv().await.unwrap_or(GenEvent::Failed(EngineError::Stopped)),
                    };
                    let (data, done) = match &event {
                        GenEvent::Token { text, .. } => (reply.chunk(text, None, None).to_string(), false),
                        GenEvent::Done { reason, prompt_tokens, cached_tokens, completion_tokens } => {
                            observe_done(
                                &metrics,
                                first_at,
                                *prompt_tokens,
                                *cached_tokens,
                                *completion_tokens,
                            );
                            Truth::learn(&mut truth, *completion_tokens);
                            let usage = usage(*prompt_tokens, *cached_tokens, *completion_tokens);
                            (reply.chunk("", Some(*reason), Some(usage)).to_string(), true)
                        }
                        GenEvent::Failed(e) => {
                            (json!({"error": {"message": e.to_string()}}).to_string(), true)
                        }
                        GenEvent::Dropped(r) => {
                            (json!({"error": {"message": r.to_string()}}).to_string(), true)
                        }
                    };
                    let mut out = vec![Ok::<Event, Infallible>(Event::default().data(data))];
                    if done {
                        out.push(Ok(Event::default().data("[DONE]")));
                        if let Some(claim) = claim.take() {
                            claim.answered();
                        }
                    }
                    Some((stream::iter(out), (None, rx, reply, first_at, claim, truth)))
                }
            },
        );
        use futures_util::StreamExt;
        return Sse::new(events.flatten()).into_response();
    }
    let first_at = Instant::now();
    let mut text = String::new();
    let mut event = first;
    let result = loop {
        match event {
            GenEvent::Token { text: piece, .. } => text.push_str(&piece),
            GenEvent::Done { reason, prompt_tokens, cached_tokens, completion_tokens } => {
                observe_done(&metrics, first_at, prompt_tokens, cached_tokens, completion_tokens);
                Truth::learn(&mut request.truth, completion_tokens);
                let usage = usage(prompt_tokens, cached_tokens, completion_tokens);
                break Ok(reply.whole(&text, reason, usage));
            }
            GenEvent::Failed(e) => break Err(ApiError::Engine(e)),
            GenEvent::Dropped(r) => break Err(ApiError::generation_dropped(r)),
        }
        event = rx.recv().await.unwrap_or(GenEvent::Failed(EngineError::Stopped));
    };
    claim.answered();
    record(&state, started, &result);
    match result {
        Ok(body) => Json(body).into_response(),
        Err(e) => e.into_response(),
    }
}

/// Validates and tokenizes the request, hands it to the driver and waits for its first event:
/// a refusal or failure then is the call's error status.
async fn start(state: &AppState, body: &[u8], format: Format) -> Result<Started, ApiError> {
    let generator = state
        .generator
        .clone()
        .ok_or(ApiError::WrongEndpoint { served: "embeddings: use /v1/embeddings or /embed" })?;
    let body = validate::object(body)?;
    if let Some(asked) = validate::optional_string(&body, "model")?
        && asked != state.model.name
    {
        return Err(ApiError::UnknownModel { asked: asked.into(), served: state.model.name.clone() });
    }
    // The predictor's input is built only when there is a predictor to read it.
    let predicting = state.predictions.is_some();
    let (field, text, predictor_input) = match format {
        Format::Completion => {
            let prompt = validate::texts(&body, "prompt", 1)?.remove(0);
            let input = predicting.then(|| prompt.clone());
            ("prompt", prompt, input)
        }
        Format::Chat => {
            let messages = messages(&body)?;
            ("messages", chatml_prompt(&messages), predicting.then(|| predictor_input(&messages)))
        }
    };
    // A whole decoder's sequence holds at most its runtime's length (its KV cache), a prefill the context.
    let context = generator.0.config.context;
    let holds = match state.model.prefill_stages {
        0 => context.min(state.model.max_input_len as usize),
        _ => context,
    };
    let mut request = parse(&body, &generator, holds, field, text).await?;
    if state.model.prefill_stages > 0 {
        return prefill::next_token(state, &body, request, &generator).await;
    }
    let predicted = match (&state.predictions, predictor_input) {
        (Some(predictions), Some(input)) => {
            request.truth = Some(Truth { predictions: predictions.clone(), text: input.clone() });
            predictions.predict(input).await
        }
        _ => None,
    };
    let generation = morph_core::Generation { max_tokens: request.max_tokens, predicted };
    let (claim, mut rx) = state.driver.generate(request.prompt.clone(), generation, request.sampling);
    match rx.recv().await {
        Some(GenEvent::Dropped(r)) => Err(ApiError::generation_dropped(r)),
        Some(GenEvent::Failed(e)) => Err(ApiError::Engine(e)),
        None => Err(ApiError::Engine(EngineError::Stopped)),
        Some(first) => Ok((request, claim, rx, first)),
    }
}

/// The request's settings and `text` (from `field`) tokenized; its prompt plus `max_tokens`
/// must fit in the `holds` tokens a sequence holds (a prompt alone too long is the policy's 413).
async fn parse(
    body: &Map<String, Value>,
    generator: &Arc<(Llama, GgufTokenizer)>,
    holds: usize,
    field: &str,
    text: String,
) -> Result<Request, ApiError> {
    let context = generator.0.config.context;
    let max_tokens = validate::number_in(body, "max_tokens", 128.0, 1.0, context as f64)? as u32;
    let temperature = validate::number_in(body, "temperature", 1.0, 0.0, 2.0)? as f32;
    let top_p = validate::number_in(body, "top_p", 1.0, 1e-6, 1.0)? as f32;
    // Without a seed each call draws its own, so repeated calls sample afresh.
    let seed =
        validate::optional_number_in(body, "seed", 0.0, 9.0e15)?.map_or_else(rand::random, |s| s as u64);
    let stream = validate::bool_or(body, "stream", false)?;
    let model = generator.clone();
    let prompt = tokio::task::spawn_blocking(move || model.1.encode(&text))
        .await
        .map_err(|e| ApiError::Engine(EngineError::Tokenize(e.to_string())))?
        .map_err(|e| match e {
            EngineError::Unrepresentable(message) => ApiError::validation(field, message),
            e => ApiError::Engine(e),
        })?;
    if prompt.len() < holds && prompt.len() + max_tokens as usize > holds {
        let message = format!(
            "the prompt's {} tokens plus max_tokens exceed the {holds} tokens a sequence holds here (the model's context of {context}, or the runtime's length: --runtime dynamic:LENxN)",
            prompt.len()
        );
        return Err(ApiError::validation("max_tokens", message));
    }
    Ok(Request {
        prompt,
        max_tokens,
        sampling: SamplingParams { temperature, top_p, seed },
        stream,
        truth: None,
    })
}

/// `messages`: a non-empty array of `{role, content}` strings.
fn messages(body: &Map<String, Value>) -> Result<Vec<Message>, ApiError> {
    let list = match body.get("messages") {
        Some(Value::Array(list)) if !list.is_empty() => list,
        Some(Value::Array(_)) => return Err(ApiError::validation("messages", "must not be empty")),
        None => return Err(ApiError::validation("messages", "is required")),
        Some(_) => return Err(ApiError::validation("messages", "must be an array of {role, content}")),
    };
    list.iter()
        .enumerate()
        .map(|(i, m)| {
            let field = |name: &str| {
                m.get(name)
                    .and_then(Value::as_str)
                    .ok_or_else(|| ApiError::validation(format!("messages[{i}].{name}"), "must be a string"))
            };
            Ok(Message::new(field("role")?, field("content")?))
        })
        .collect()
}

/// What the length predictor reads of a chat: its earlier turns and last prompt (§3.1), the
/// system message left out.
fn predictor_input(messages: &[Message]) -> String {
    let turns: Vec<Message> = messages.iter().filter(|m| m.role != "system").cloned().collect();
    match turns.split_last() {
        Some((last, history)) => predictor_text(history.iter().map(|m| m.content.as_str()), &last.content),
        None => String::new(),
    }
}

/// The OpenAI `usage` object (`cached_tokens`: prompt tokens a kept cache held).
fn usage(prompt_tokens: usize, cached_tokens: usize, completion_tokens: usize) -> Value {
    json!({
        "prompt_tokens": prompt_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    })
}

/// A finished generation's metrics: its prompt tokens (and those cached), and its time per output
/// token after the first (at `first_at`).
fn observe_done(
    metrics: &crate::metrics::Metrics,
    first_at: Instant,
    prompt_tokens: usize,
    cached_tokens: usize,
    completion_tokens: usize,
) {
    use std::sync::atomic::Ordering::Relaxed;
    metrics.prompt_tokens.fetch_add(prompt_tokens as u64, Relaxed);
    metrics.cached_prompt_tokens.fetch_add(cached_tokens as u64, Relaxed);
    if completion_tokens > 1 {
        let per_token = first_at.elapsed().as_secs_f64() / (completion_tokens - 1) as f64;
        metrics.time_per_output_token_seconds.observe(per_token);
    }
}

fn unix_nanos() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}

fn finish(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
    }
}

/// The response bodies of one call, in its format.
struct Reply {
    format: Format,
    id: String,
    model: String,
}

impl Reply {
    fn created() -> u64 {
        (unix_nanos() / 1_000_000_000) as u64
    }

    fn whole(&self, text: &str, reason: FinishReason, usage: Value) -> Value {
        let choice = match self.format {
            Format::Completion => {
                json!({"index": 0, "text": text, "logprobs": null, "finish_reason": finish(reason)})
            }
            Format::Chat => {
                json!({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish(reason)})
            }
        };
        let object = match self.format {
            Format::Completion => "text_completion",
            Format::Chat => "chat.completion",
        };
        json!({"id": self.id, "object": object, "created": Self::created(), "model": self.model, "choices": [choice], "usage": usage})
    }

    fn chunk(&self, text: &str, reason: Option<FinishReason>, usage: Option<Value>) -> Value {
        let reason = reason.map(finish);
        let (object, choice) = match self.format {
            Format::Completion => {
                ("text_completion", json!({"index": 0, "text": text, "finish_reason": reason}))
            }
            Format::Chat => (
                "chat.completion.chunk",
                json!({"index": 0, "delta": {"content": text}, "finish_reason": reason}),
            ),
        };
        let mut body = json!({"id": self.id, "object": object, "created": Self::created(), "model": self.model, "choices": [choice]});
        if let Some(usage) = usage {
            body["usage"] = usage;
        }
        body
    }
}
