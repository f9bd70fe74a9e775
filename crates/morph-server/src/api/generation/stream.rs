//! A generation call as server-sent events: one chunk per piece of a choice's text (choices
//! interleaved as their tokens come; an echoed prompt first, whole, with its tokens' logprobs
//! where asked), each choice's last with its finish reason; a call whose
//! answer must be calls streams each call's name, then its arguments as they are written; a
//! call that offered tools to a model free to answer either way gets the text before any call as
//! it comes, each call whole once it is (Hermes' blocks as each closes, the one-call formats at
//! the end), and text not part of a call at the end; a chunk with
//! the call's usage when asked for (`stream_options.include_usage`), then `data: [DONE]`. The
//! callers' claims travel with the stream: dropped with it before the end (the client went
//! away), they cancel the generations still running.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, BoxStream, SelectAll};
use futures_util::{Stream, StreamExt};
use morph_decoder::{AutoPiece, AutoReader, CallPiece, CallScanner, FinishReason, GenEvent};
use morph_engine::EngineError;
use tokio::sync::mpsc::UnboundedReceiver;

use super::answers::{GenerationUsage, ToolCallDelta};
use super::logprobs::{ChoiceLogprobs, Logprobbed};
use super::reply::{Reply, choice_done};
use super::tool_reply::{CallsEnd, call_id, out};
use crate::api::AppState;
use crate::api::answers::{ErrorDetail, ErrorResponse};
use crate::driver::Claim;
use crate::error::CallError;
use crate::infer::{Echo, StartedGeneration, Truth};

/// The call's choices as one stream, and what is left to answer.
struct Merged {
    events: SelectAll<BoxStream<'static, (usize, GenEvent)>>,
    /// Each choice's claim, until it is answered.
    claims: Vec<Option<Claim>>,
    truths: Vec<Option<Truth>>,
    /// Each choice's prompt, until it is sent back (where the call echoes it).
    echoes: Vec<Option<Echo>>,
    usage: GenerationUsage,
    /// Choices not finished yet.
    open: usize,
    /// Bytes of each choice's text sent so far.
    sent: Vec<usize>,
    /// Whether each choice's first chunk was sent.
    begun: Vec<bool>,
    /// Each choice's text so far, where the call offered tools (to read calls out of it).
    held: Vec<String>,
    /// Where the answer may be text or calls: each choice's reader of them.
    autos: Vec<Option<AutoReader>>,
    /// Where the answer must be calls: each choice's calls read as they are written, and how
    /// many have begun.
    scanners: Vec<Option<CallScanner>>,
    calls: Vec<usize>,
    first_at: Instant,
    /// The last events were sent.
    over: bool,
}

impl Merged {
    /// Choice `index`'s text grown by `text`, where it may be text or calls: the chunks of what
    /// this tells, and with `end` the rest and the last chunk.
    fn auto_chunks(
        &mut self,
        reply: &Reply,
        index: usize,
        text: &str,
        end: Option<FinishReason>,
    ) -> Vec<String> {
        self.held[index].push_str(text);
        let Some(reader) = self.autos[index].as_mut() else { return Vec::new() };
        let mut pieces = reader.feed(&self.held[index]);
        if end.is_some() {
            pieces.extend(reader.finish(&self.held[index]));
        }
        let mut chunks = Vec::with_capacity(pieces.len() + 1);
        for piece in pieces {
            let first = !std::mem::replace(&mut self.begun[index], true);
            chunks.push(json(&match piece {
                AutoPiece::Text(text) => reply.chunk(index, first, text, None, None),
                AutoPiece::Call(call) => {
                    let call = out(call);
                    let delta = ToolCallDelta::begin(
                        self.calls[index],
                        call.id,
                        call.function.name,
                        call.function.arguments,
                    );
                    self.calls[index] += 1;
                    reply.calls_chunk(index, first, vec![delta], None)
                }
            }));
        }
        if let Some(reason) = end {
            let first = !std::mem::replace(&mut self.begun[index], true);
            chunks.push(json(&match self.calls[index] {
                0 => reply.chunk(index, first, String::new(), Some(reason), None),
                calls => {
                    let end = CallsEnd { reason, calls, left_open: false };
                    reply.calls_chunk(index, first, Vec::new(), Some(end))
                }
            }));
        }
        chunks
    }

    /// Where choice `index` must be calls, its last `tail` (with its generation's `reason`):
    /// the pieces of its calls this reveals, and how its calls ended.
    fn forced_end(
        &mut self,
        index: usize,
        tail: &str,
        reason: FinishReason,
    ) -> Option<(Vec<ToolCallDelta>, CallsEnd)> {
        self.scanners[index].as_ref()?;
        let deltas = self.call_deltas(index, tail);
        let left_open = self.scanners[index].as_ref().is_some_and(CallScanner::in_a_call);
        Some((deltas, CallsEnd { reason, calls: self.calls[index], left_open }))
    }

    /// Before choice `index`'s first `event`, where the call echoes its prompt: the chunk of the
    /// prompt's text, with its tokens' logprobs when `event` brings them.
    fn echo_chunk(
        &mut self,
        reply: &Reply,
        index: usize,
        event: &GenEvent,
        state: &AppState,
    ) -> Option<String> {
        let echo = self.echoes[index].take()?;
        let logprobs = match (event, state.generator()) {
            (GenEvent::PromptLogprobs(scored), Ok(generator)) => {
                let tokens = Logprobbed::prompt(generator, &echo.tokens, scored);
                Some(ChoiceLogprobs::of(reply.format(), tokens, 0))
            }
            _ => None,
        };
        let first = !std::mem::replace(&mut self.begun[index], true);
        self.sent[index] += echo.text.len();
        Some(json(&reply.chunk(index, first, echo.text, None, logprobs)))
    }

    /// Choice `index`'s text grown by `text`: the pieces of its calls this reveals.
    fn call_deltas(&mut self, index: usize, text: &str) -> Vec<ToolCallDelta> {
        self.held[index].push_str(text);
        let Some(scanner) = self.scanners[index].as_mut() else { return Vec::new() };
        let calls = &mut self.calls[index];
        let pieces = scanner.feed(&self.held[index]);
        pieces
            .into_iter()
            .map(|piece| match piece {
                CallPiece::Begin { name } => {
                    *calls += 1;
                    ToolCallDelta::begin(*calls - 1, call_id(), name, String::new())
                }
                CallPiece::Arguments(more) => ToolCallDelta::more(calls.saturating_sub(1), more),
            })
            .collect()
    }
}

pub(super) fn events(
    generations: Vec<StartedGeneration>,
    reply: Reply,
    include_usage: bool,
    n: usize,
    state: &AppState,
) -> Response {
    let (metrics, drain) = (state.driver.metrics.clone(), state.drain.clone());
    let open = generations.len();
    let (mut claims, mut truths, mut echoes, mut events) =
        (Vec::new(), Vec::new(), Vec::new(), SelectAll::new());
    for (index, StartedGeneration { claim, events: rx, first, truth, echo }) in
        generations.into_iter().enumerate()
    {
        claims.push(Some(claim));
        truths.push(truth);
        echoes.push(echo);
        events.push(choice_events(first, rx).map(move |event| (index, event)).boxed());
    }
    let merged = Merged {
        events,
        claims,
        truths,
        echoes,
        usage: GenerationUsage::default(),
        open,
        sent: vec![0; open],
        begun: vec![false; open],
        held: vec![String::new(); open],
        scanners: vec![reply.scanner(); open],
        autos: vec![reply.auto(); open],
        calls: vec![0; open],
        first_at: Instant::now(),
        over: false,
    };
    let reply = Arc::new(reply);
    let state = state.clone();
    let body = stream::unfold(merged, move |mut m| {
        let (metrics, reply, drain, state) = (metrics.clone(), reply.clone(), drain.clone(), state.clone());
        async move {
            if m.over {
                return None;
            }
            let next = tokio::select! {
                next = m.events.next() => next.unwrap_or((0, GenEvent::Failed(EngineError::Stopped))),
                () = drain.deadline() => (0, GenEvent::Failed(EngineError::Stopped)),
            };
            let shutting_down = drain.deadline_has_passed();
            let (index, event) = next;
            let mut out = Vec::new();
            let failed = matches!(event, GenEvent::Failed(_) | GenEvent::Dropped(_));
            if !failed && !shutting_down {
                out.extend(m.echo_chunk(&reply, index, &event, &state));
            }
            match event {
                _ if shutting_down => out.push(error(&CallError::ShuttingDown)),
                // Sent with the echoed prompt.
                GenEvent::PromptLogprobs(_) => {}
                GenEvent::Token { text, .. } if m.scanners[index].is_some() => {
                    let deltas = m.call_deltas(index, &text);
                    if !deltas.is_empty() {
                        let first = !std::mem::replace(&mut m.begun[index], true);
                        out.push(json(&reply.calls_chunk(index, first, deltas, None)));
                    }
                }
                GenEvent::Token { text, .. } if m.autos[index].is_some() => {
                    out.extend(m.auto_chunks(&reply, index, &text, None));
                }
                GenEvent::Token { id, text, logprob } => {
                    let logprobs = match (logprob, state.generator()) {
                        (Some(lp), Ok(generator)) => {
                            let token = Logprobbed::new(generator, id, &lp);
                            Some(ChoiceLogprobs::of(reply.format(), vec![token], m.sent[index]))
                        }
                        _ => None,
                    };
                    let first = !std::mem::replace(&mut m.begun[index], true);
                    m.sent[index] += text.len();
                    out.push(json(&reply.chunk(index, first, text, None, logprobs)));
                }
                GenEvent::Done { reason, tail, prompt_tokens, cached_tokens, completion_tokens } => {
                    let counts = (prompt_tokens, cached_tokens, completion_tokens);
                    let usage = choice_done(&metrics, m.first_at, (&mut m.truths[index], reason), counts);
                    m.usage = m.usage.add(usage.of_choice(index, n));
                    if let Some(claim) = m.claims[index].take() {
                        claim.answered();
                    }
                    if m.autos[index].is_some() {
                        out.extend(m.auto_chunks(&reply, index, &tail, Some(reason)));
                    } else if let Some(end) = m.forced_end(index, &tail, reason) {
                        let (deltas, end) = end;
                        let first = !std::mem::replace(&mut m.begun[index], true);
                        out.push(json(&reply.calls_chunk(index, first, deltas, Some(end))));
                    } else {
                        let first = !std::mem::replace(&mut m.begun[index], true);
                        out.push(json(&reply.chunk(index, first, tail, Some(reason), None)));
                    }
                    m.open -= 1;
                    if m.open == 0 && include_usage {
                        out.push(json(&reply.usage_chunk(m.usage)));
                    }
                }
                GenEvent::Failed(e) => out.push(error(&CallError::Engine(e))),
                GenEvent::Dropped(r) => out.push(error(&CallError::generation_dropped(r))),
            }
            // A failed choice ends the call: the others' claims drop with the stream.
            m.over = m.open == 0 || failed || shutting_down;
            if m.over {
                out.push("[DONE]".to_string());
            }
            let sent = out.into_iter().map(|data| Ok::<Event, Infallible>(Event::default().data(data)));
            Some((stream::iter(sent.collect::<Vec<_>>()), m))
        }
    });
    Sse::new(body.flatten()).into_response()
}

/// One choice's events: its first, then what its receiver brings up to its last (`Done`,
/// `Failed` or `Dropped`); a receiver closed before that ends it as a stopped engine.
pub(super) fn choice_events(
    first: GenEvent,
    rx: UnboundedReceiver<GenEvent>,
) -> impl Stream<Item = GenEvent> + use<> {
    stream::unfold((Some(first), Some(rx)), |(next, rx)| async move {
        let mut rx = rx?;
        let event = match next {
            Some(event) => event,
            None => rx.recv().await.unwrap_or(GenEvent::Failed(EngineError::Stopped)),
        };
        let last = event.is_last();
        Some((event, (None, (!last).then_some(rx))))
    })
}

fn json(body: &impl serde::Serialize) -> String {
    serde_json::to_string(body).unwrap_or_default()
}

/// An error event: `{"error": {"message", "type"}}`, as the call's error would have been.
fn error(e: &CallError) -> String {
    json(&ErrorResponse { error: ErrorDetail { message: e.to_string(), kind: e.kind().label() } })
}
