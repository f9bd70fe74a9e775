//! A generation as server-sent events: one chunk per token, the last with its finish reason and
//! usage, then `data: [DONE]`. The caller's claim travels with the stream: dropped with it
//! before the end (the client went away), it cancels the generation.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::{StreamExt, stream};
use morph_decoder::GenEvent;
use morph_engine::EngineError;

use super::reply::{Reply, observe_done};
use super::responses::{ErrorDetail, ErrorResponse, GenerationUsage};
use crate::infer::{Generation, Truth};
use crate::metrics::Metrics;

pub(super) fn events(generation: Generation, reply: Reply, metrics: Arc<Metrics>) -> Response {
    let Generation { claim, events, first, truth } = generation;
    let events = stream::unfold(
        (Some(first), events, reply, Instant::now(), Some(claim), truth),
        move |(next, mut rx, reply, first_at, mut claim, mut truth)| {
            let metrics = metrics.clone();
            async move {
                claim.as_ref()?;
                let event = match next {
                    Some(e) => e,
                    None => rx.recv().await.unwrap_or(GenEvent::Failed(EngineError::Stopped)),
                };
                let (data, done) = match &event {
                    GenEvent::Token { text, .. } => (json(&reply.chunk(text.clone(), None, None)), false),
                    GenEvent::Done { reason, prompt_tokens, cached_tokens, completion_tokens } => {
                        observe_done(&metrics, first_at, *prompt_tokens, *cached_tokens, *completion_tokens);
                        Truth::learn(&mut truth, *completion_tokens);
                        let usage = GenerationUsage::new(*prompt_tokens, *cached_tokens, *completion_tokens);
                        (json(&reply.chunk(String::new(), Some(*reason), Some(usage))), true)
                    }
                    GenEvent::Failed(e) => (error(e.to_string()), true),
                    GenEvent::Dropped(r) => (error(r.to_string()), true),
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
    Sse::new(events.flatten()).into_response()
}

fn json(body: &impl serde::Serialize) -> String {
    serde_json::to_string(body).unwrap_or_default()
}

/// An error event: `{"error": {"message"}}`.
fn error(message: String) -> String {
    json(&ErrorResponse { error: ErrorDetail { message, kind: None } })
}
