//! A Responses API call as its server-sent events, each `event: TYPE` with a `data` object
//! carrying the same `type` and a `sequence_number`: `response.created`,
//! `response.in_progress`, `response.output_item.added`, `response.content_part.added`, one
//! `response.output_text.delta` per piece of text, then `response.output_text.done`,
//! `response.content_part.done`, `response.output_item.done` and `response.completed` with the
//! whole response and its usage (its `status` `incomplete` when the token limit cut it, as vLLM
//! sends it: the SDKs' stream helpers wait for `response.completed`). A call that offered tools
//! gets its output items at the end, once its text is whole (a call is known only then): each
//! item's `added`, its text or arguments in one delta and their `done`, its `output_item.done`.
//! A failure ends the stream
//! with an `error` event. The call's claim travels with the stream: dropped before the end (the
//! client went away), it cancels the generation.

use std::convert::Infallible;
use std::time::Instant;

use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use futures_util::stream::{self, BoxStream};
use morph_decoder::{FinishReason, GenEvent};
use morph_engine::EngineError;
use serde_json::{Value, json};

use super::AppState;
use super::openai_responses::{OutputItem, OutputMessage, ResponseIds, ResponseObject};
use super::reply::choice_done;
use super::responses::GenerationUsage;
use super::stream::choice_events;
use super::tool_reply::{Answer, CallReader};
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
        json!({"item_id": self.ids.message, "output_index": 0, "content_index": 0})
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
        vec![
            self.event("response.output_item.added", json!({"output_index": 0, "item": item})),
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

    /// The message `item`'s text, part and item done (output index 0).
    fn message_done(&mut self, item: &Value) -> Vec<Event> {
        let (mut done, mut part_done) = (self.at(), self.at());
        done["text"] = json!(self.text);
        done["logprobs"] = json!([]);
        part_done["part"] = item["content"][0].clone();
        vec![
            self.event("response.output_text.done", done),
            self.event("response.content_part.done", part_done),
            self.event("response.output_item.done", json!({"output_index": 0, "item": item})),
        ]
    }

    /// A held answer's every event at its end: its message (the text, in one delta) or its
    /// calls (the arguments, each in one delta), then the response's.
    fn held_closing(&mut self, reason: FinishReason, usage: GenerationUsage) -> Vec<Event> {
        let answer = CallReader::answer(self.calls.as_ref(), std::mem::take(&mut self.text));
        let response = ResponseObject::new(&self.ids, answer, reason, usage);
        let value = serde_json::to_value(&response).unwrap_or_default();
        let mut events = Vec::new();
        for (index, item) in response.output().iter().enumerate() {
            match item {
                OutputItem::Message(message) => {
                    events.extend(self.message_opening());
                    events.push(self.delta(message.text()));
                    events.extend(self.message_done(&value["output"][index]));
                }
                OutputItem::FunctionCall(call) => {
                    let at = json!({"item_id": call.id(), "output_index": index});
                    let (mut delta, mut done) = (at.clone(), at);
                    delta["delta"] = json!(call.arguments());
                    done["arguments"] = json!(call.arguments());
                    let begun = serde_json::to_value(call.begun()).unwrap_or_default();
                    events.push(
                        self.event(
                            "response.output_item.added",
                            json!({"output_index": index, "item": begun}),
                        ),
                    );
                    events.push(self.event("response.function_call_arguments.delta", delta));
                    events.push(self.event("response.function_call_arguments.done", done));
                    let item = &value["output"][index];
                    events.push(
                        self.event("response.output_item.done", json!({"output_index": index, "item": item})),
                    );
                }
            }
        }
        events.push(self.event("response.completed", json!({ "response": value })));
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
    let StartedGeneration { claim, events, first, truth } = generation;
    let mut streaming = Streaming {
        events: choice_events(first, events).boxed(),
        claim: Some(claim),
        truth,
        ids,
        text: String::new(),
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
            s.over = shutting_down || !matches!(event, GenEvent::Token { .. });
            let out = match event {
                _ if shutting_down => vec![s.failed(&CallError::ShuttingDown)],
                GenEvent::Token { text, .. } if s.calls.is_some() => {
                    s.text.push_str(&text);
                    Vec::new()
                }
                GenEvent::Token { text, .. } => vec![s.delta(&text)],
                GenEvent::Done { reason, tail, prompt_tokens, cached_tokens, completion_tokens } => {
                    let counts = (prompt_tokens, cached_tokens, completion_tokens);
                    let usage = choice_done(&metrics, s.first_at, &mut s.truth, counts);
                    if let Some(claim) = s.claim.take() {
                        claim.answered();
                    }
                    if s.calls.is_some() {
                        s.text.push_str(&tail);
                        s.held_closing(reason, usage)
                    } else {
                        let mut out = if tail.is_empty() { Vec::new() } else { vec![s.delta(&tail)] };
                        out.extend(s.closing(reason, usage));
                        out
                    }
                }
                GenEvent::Failed(e) => vec![s.failed(&CallError::Engine(e))],
                GenEvent::Dropped(r) => vec![s.failed(&CallError::generation_dropped(r))],
            };
            Some((stream::iter(out.into_iter().map(Ok::<Event, Infallible>)), s))
        }
    });
    Sse::new(stream::iter(opening.into_iter().map(Ok::<Event, Infallible>)).chain(body.flatten()))
        .into_response()
}
