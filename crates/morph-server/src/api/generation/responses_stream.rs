//! A Responses API call as its server-sent events, each `event: TYPE` with a `data` object
//! carrying the same `type` and a `sequence_number`: `response.created`,
//! `response.in_progress`, `response.output_item.added`, `response.content_part.added`, one
//! `response.output_text.delta` per piece of text, then `response.output_text.done`,
//! `response.content_part.done`, `response.output_item.done` and `response.completed` with the
//! whole response and its usage (its `status` `incomplete` when the token limit cut it, as vLLM
//! sends it: the SDKs' stream helpers wait for `response.completed`). A call whose answer must be
//! calls streams each as it is written: its `output_item.added`, its arguments in
//! `function_call_arguments.delta` pieces, their `done` and its `output_item.done`. A call that
//! offered tools to a model free to answer either way gets its text as it comes, in a message
//! item opened at its first piece and done at the end, and each call as an item of its own once
//! the call is whole (its arguments in one delta), numbered in the order they came.
//! A failure ends the stream
//! with an `error` event. The call's claim travels with the stream: dropped before the end (the
//! client went away), it cancels the generation.

use std::convert::Infallible;
use std::time::Instant;

use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use futures_util::stream::{self, BoxStream};
use morph_decoder::{AutoPiece, AutoReader, CallPiece, CallScanner, FinishReason, GenEvent};
use morph_engine::EngineError;
use serde_json::{Value, json};

use super::answers::GenerationUsage;
use super::answers::{FunctionCallOut, ToolCallOut};
use super::reply::choice_done;
use super::response_object::{FunctionCallItem, OutputItem, OutputMessage, ResponseIds, ResponseObject};
use super::stream::choice_events;
use super::tool_reply::{Answer, CallReader, call_id, out};
use crate::api::AppState;
use crate::driver::Claim;
use crate::error::CallError;
use crate::infer::{StartedGeneration, Truth};

/// The stream's state between events.
struct Streaming {
    events: BoxStream<'static, GenEvent>,
    claim: Option<Claim>,
    truth: Option<Truth>,
    ids: ResponseIds,
    text: String,
    /// Where the call offered tools: the text is held to its end and read for calls.
    calls: Option<CallReader>,
    /// Where the answer must be calls: they are read as they are written, and streamed.
    scanner: Option<CallScanner>,
    streamed: Vec<FunctionCallItem>,
    /// Where the answer may be text or calls: its reader, the whole text so far, and the items
    /// told in order (`None`: the message, at `message_at`).
    auto: Option<AutoReader>,
    held: String,
    told: Vec<Option<FunctionCallItem>>,
    /// The message's output index.
    message_at: usize,
    /// The next event's `sequence_number`.
    sequence: u64,
    first_at: Instant,
    over: bool,
}

impl Streaming {
    /// An event of `kind` with `fields` (an object), numbered.
    fn event(&mut self, kind: &str, mut fields: Value) -> Event {
        fields["type"] = json!(kind);
        fields["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        Event::default().event(kind).data(fields.to_string())
    }

    /// Where the message's text lies, as every text event names it.
    fn at(&self) -> Value {
        json!({"item_id": self.ids.message, "output_index": self.message_at, "content_index": 0})
    }

    fn opening(&mut self) -> Vec<Event> {
        let response = serde_json::to_value(ResponseObject::in_progress(&self.ids)).unwrap_or_default();
        let mut events = vec![
            self.event("response.created", json!({ "response": response })),
            self.event("response.in_progress", json!({ "response": response })),
        ];
        if self.calls.is_none() {
            events.extend(self.message_opening());
        }
        events
    }

    /// The message's item and its text part, added.
    fn message_opening(&mut self) -> Vec<Event> {
        let item =
            serde_json::to_value(OutputMessage::new(&self.ids, "in_progress", None)).unwrap_or_default();
        let part = json!({"type": "output_text", "text": "", "annotations": []});
        let mut added = self.at();
        added["part"] = part;
        let index = self.message_at;
        vec![
            self.event("response.output_item.added", json!({"output_index": index, "item": item})),
            self.event("response.content_part.added", added),
        ]
    }

    fn delta(&mut self, piece: &str) -> Event {
        self.text.push_str(piece);
        let mut delta = self.at();
        delta["delta"] = json!(piece);
        delta["logprobs"] = json!([]);
        self.event("response.output_text.delta", delta)
    }

    /// The streamed message's last events and the response's.
    fn closing(&mut self, reason: FinishReason, usage: GenerationUsage) -> Vec<Event> {
        let answer = Answer::Text(self.text.clone());
        let response =
            serde_json::to_value(ResponseObject::new(&self.ids, answer, reason, usage)).unwrap_or_default();
        let mut events = self.message_done(&response["output"][0]);
        events.push(self.event("response.completed", json!({ "response": response })));
        events
    }

    /// The message `item`'s text, part and item done.
    fn message_done(&mut self, item: &Value) -> Vec<Event> {
        let (mut done, mut part_done) = (self.at(), self.at());
        done["text"] = json!(self.text);
        done["logprobs"] = json!([]);
        part_done["part"] = item["content"][0].clone();
        vec![
            self.event("response.output_text.done", done),
            self.event("response.content_part.done", part_done),
            self.event("response.output_item.done", json!({"output_index": self.message_at, "item": item})),
        ]
    }

    /// A free answer's text grown by `text` (with `end`, whole): its text into the message,
    /// opened at the first piece, and each call as an item of its own once it is whole.
    fn stream_auto(&mut self, text: &str, end: bool) -> Vec<Event> {
        self.held.push_str(text);
        let Some(reader) = self.auto.as_mut() else { return Vec::new() };
        let mut pieces = reader.feed(&self.held);
        if end {
            pieces.extend(reader.finish(&self.held));
        }
        let mut events = Vec::new();
        for piece in pieces {
            match piece {
                AutoPiece::Text(text) => {
                    if !self.told.iter().any(Option::is_none) {
                        events.extend(self.open_message());
                    }
                    events.push(self.delta(&text));
                }
                AutoPiece::Call(call) => {
                    let item = FunctionCallItem::new(out(call), "completed");
                    events.extend(self.whole_call(self.told.len(), &item));
                    self.told.push(Some(item));
                }
            }
        }
        events
    }

    /// The message opened as the next item.
    fn open_message(&mut self) -> Vec<Event> {
        self.message_at = self.told.len();
        self.told.push(None);
        self.message_opening()
    }

    /// A whole call's events as item `index`: added, its arguments in one delta, done.
    fn whole_call(&mut self, index: usize, item: &FunctionCallItem) -> Vec<Event> {
        let at = json!({"item_id": item.id(), "output_index": index});
        let (mut delta, mut done) = (at.clone(), at);
        delta["delta"] = json!(item.arguments());
        done["arguments"] = json!(item.arguments());
        let begun = serde_json::to_value(item.begun()).unwrap_or_default();
        let whole = serde_json::to_value(item).unwrap_or_default();
        vec![
            self.event("response.output_item.added", json!({"output_index": index, "item": begun})),
            self.event("response.function_call_arguments.delta", delta),
            self.event("response.function_call_arguments.done", done),
            self.event("response.output_item.done", json!({"output_index": index, "item": whole})),
        ]
    }

    /// A free answer's end: its message done (opened, empty, where nothing was told), then the
    /// response of every item in the order told.
    fn auto_closing(&mut self, reason: FinishReason, usage: GenerationUsage) -> Vec<Event> {
        let mut events = if self.told.is_empty() { self.open_message() } else { Vec::new() };
        let status = ResponseObject::status(reason);
        let output = self
            .told
            .iter()
            .map(|item| match item {
                None => OutputItem::Message(OutputMessage::new(&self.ids, status, Some(self.text.clone()))),
                Some(call) => OutputItem::FunctionCall(call.clone()),
            })
            .collect();
        let response = ResponseObject::with_output(&self.ids, output, reason, usage);
        let response = serde_json::to_value(response).unwrap_or_default();
        if self.told.iter().any(Option::is_none) {
            events.extend(self.message_done(&response["output"][self.message_at]));
        }
        events.push(self.event("response.completed", json!({ "response": response })));
        events
    }

    /// The forced answer's text grown by `text`: each call that begins is added, its arguments
    /// streamed as they come, and the call before it done.
    fn stream_calls(&mut self, text: &str) -> Vec<Event> {
        self.text.push_str(text);
        let pieces = self.scanner.as_mut().map(|s| s.feed(&self.text)).unwrap_or_default();
        let mut events = Vec::new();
        for piece in pieces {
            match piece {
                CallPiece::Begin { name } => {
                    events.extend(self.call_done("in_progress"));
                    let call = ToolCallOut {
                        id: call_id(),
                        kind: "function",
                        function: FunctionCallOut { name, arguments: String::new() },
                    };
                    let item = FunctionCallItem::new(call, "in_progress");
                    let index = self.streamed.len();
                    let added = json!({"output_index": index, "item": serde_json::to_value(&item).unwrap_or_default()});
                    self.streamed.push(item);
                    events.push(self.event("response.output_item.added", added));
                }
                CallPiece::Arguments(more) => {
                    let index = self.streamed.len().saturating_sub(1);
                    let Some(item) = self.streamed.last_mut() else { continue };
                    item.push_arguments(&more);
                    let delta = json!({"item_id": item.id(), "output_index": index, "delta": more});
                    events.push(self.event("response.function_call_arguments.delta", delta));
                }
            }
        }
        events
    }

    /// The last streamed call's arguments and item done (nothing if none is open).
    fn call_done(&mut self, status: &'static str) -> Vec<Event> {
        let Some(item) = self.streamed.last() else { return Vec::new() };
        if item.status() != "in_progress" {
            return Vec::new();
        }
        let (index, done) = (self.streamed.len() - 1, item.done(status));
        let arguments = json!({"item_id": done.id(), "output_index": index, "arguments": done.arguments()});
        let item = json!({"output_index": index, "item": serde_json::to_value(&done).unwrap_or_default()});
        self.streamed[index] = done;
        vec![
            self.event("response.function_call_arguments.done", arguments),
            self.event("response.output_item.done", item),
        ]
    }

    /// A forced answer's end: its last call done, then the response of the calls streamed.
    fn calls_closing(&mut self, reason: FinishReason, usage: GenerationUsage) -> Vec<Event> {
        let status = ResponseObject::status(reason);
        let mut events = self.call_done(status);
        let output = self.streamed.iter().map(|item| OutputItem::FunctionCall(item.done(status))).collect();
        let response = ResponseObject::with_output(&self.ids, output, reason, usage);
        let response = serde_json::to_value(response).unwrap_or_default();
        events.push(self.event("response.completed", json!({ "response": response })));
        events
    }

    fn failed(&mut self, e: &CallError) -> Event {
        self.event("error", json!({"code": e.kind().label(), "message": e.to_string(), "param": null}))
    }
}

pub(super) fn events(
    generation: StartedGeneration,
    ids: ResponseIds,
    calls: Option<CallReader>,
    state: &AppState,
) -> Response {
    let (metrics, drain) = (state.driver.metrics.clone(), state.drain.clone());
    let StartedGeneration { claim, events, first, truth, .. } = generation;
    let mut streaming = Streaming {
        events: choice_events(first, events).boxed(),
        claim: Some(claim),
        truth,
        ids,
        text: String::new(),
        scanner: calls.as_ref().and_then(CallReader::scanner),
        streamed: Vec::new(),
        auto: calls.as_ref().and_then(CallReader::auto),
        held: String::new(),
        told: Vec::new(),
        message_at: 0,
        calls,
        sequence: 0,
        first_at: Instant::now(),
        over: false,
    };
    let opening = streaming.opening();
    let body = stream::unfold(streaming, move |mut s| {
        let (metrics, drain) = (metrics.clone(), drain.clone());
        async move {
            if s.over {
                return None;
            }
            let event = tokio::select! {
                next = s.events.next() => next.unwrap_or(GenEvent::Failed(EngineError::Stopped)),
                () = drain.deadline() => GenEvent::Failed(EngineError::Stopped),
            };
            let shutting_down = drain.deadline_has_passed();
            s.over = shutting_down || event.is_last();
            let out = match event {
                _ if shutting_down => vec![s.failed(&CallError::ShuttingDown)],
                GenEvent::Token { text, .. } if s.scanner.is_some() => s.stream_calls(&text),
                GenEvent::Token { text, .. } if s.auto.is_some() => s.stream_auto(&text, false),
                GenEvent::Token { text, .. } => vec![s.delta(&text)],
                GenEvent::Done { reason, tail, prompt_tokens, cached_tokens, completion_tokens } => {
                    let counts = (prompt_tokens, cached_tokens, completion_tokens);
                    let usage = choice_done(&metrics, s.first_at, (&mut s.truth, reason), counts);
                    if let Some(claim) = s.claim.take() {
                        claim.answered();
                    }
                    if s.scanner.is_some() {
                        let mut out = s.stream_calls(&tail);
                        out.extend(s.calls_closing(reason, usage));
                        out
                    } else if s.auto.is_some() {
                        let mut out = s.stream_auto(&tail, true);
                        out.extend(s.auto_closing(reason, usage));
                        out
                    } else {
                        let mut out = if tail.is_empty() { Vec::new() } else { vec![s.delta(&tail)] };
                        out.extend(s.closing(reason, usage));
                        out
                    }
                }
                GenEvent::Failed(e) => vec![s.failed(&CallError::Engine(e))],
                GenEvent::Dropped(r) => vec![s.failed(&CallError::generation_dropped(r))],
                // The Responses API never asks for its prompt scored.
                GenEvent::PromptLogprobs(_) => Vec::new(),
            };
            Some((stream::iter(out.into_iter().map(Ok::<Event, Infallible>)), s))
        }
    });
    Sse::new(stream::iter(opening.into_iter().map(Ok::<Event, Infallible>)).chain(body.flatten()))
        .into_response()
}
