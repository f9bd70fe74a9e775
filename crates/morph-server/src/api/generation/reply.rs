//! The bodies of a generation's answer in its format (a whole completion, or a stream's
//! chunks), and the metrics a finished generation records.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use morph_decoder::{AutoReader, CallScanner, FinishReason};

use super::answers::{ChatDelta, ChatText, Choice, CompletionResponse, GenerationUsage, ToolCallDelta};
use super::logprobs::ChoiceLogprobs;
use super::tool_reply::{Answer, CallReader, CallsEnd};
use crate::infer::{GenerationFormat, Truth};
use crate::metrics::Metrics;

/// A choice finished for `reason` with these token counts: its metrics (its prompt tokens, those
/// cached, and its time per output token after the first, at `first_at`), its true output length
/// learnt by the predictor, and its usage.
pub(super) fn choice_done(
    metrics: &Metrics,
    first_at: Instant,
    (truth, reason): (&mut Option<Truth>, FinishReason),
    (prompt_tokens, cached_tokens, completion_tokens): (usize, usize, usize),
) -> GenerationUsage {
    metrics.prompt_tokens(prompt_tokens, cached_tokens);
    if completion_tokens > 1 {
        metrics.time_per_output_token(first_at.elapsed().as_secs_f64() / (completion_tokens - 1) as f64);
    }
    Truth::learn(truth, completion_tokens, reason);
    GenerationUsage::new(prompt_tokens, cached_tokens, completion_tokens)
}

pub(super) fn unix_nanos() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}

/// The role of every generated message.
const ASSISTANT: &str = "assistant";

fn finish(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
    }
}

/// An answer that is calls finishes for them.
const TOOL_CALLS: &str = "tool_calls";

/// An answer of calls finishes for them (whatever the token limit cut after them), unless it
/// holds none or its last was left open (cut by the token limit or a stop string): then for its
/// reason (`length`, `stop`).
fn calls_finish(CallsEnd { reason, calls, left_open }: CallsEnd) -> &'static str {
    match calls == 0 || left_open {
        true => finish(reason),
        false => TOOL_CALLS,
    }
}

/// One choice's answer, whole.
pub(super) struct Finished {
    pub text: String,
    pub reason: FinishReason,
    pub logprobs: Option<ChoiceLogprobs>,
}

/// The response bodies of one call, in its format.
pub(super) struct Reply {
    format: GenerationFormat,
    id: String,
    model: String,
    /// When the call was taken (Unix seconds): the same on every chunk, as OpenAI's are.
    created: u64,
    /// Where the call offered tools: how calls are read out of each choice's text.
    calls: Option<CallReader>,
}

impl Reply {
    /// The bodies of a call of `format` to `model`.
    pub(super) fn new(format: GenerationFormat, model: String, calls: Option<CallReader>) -> Self {
        let now = unix_nanos();
        let prefix = match format {
            GenerationFormat::Completion => "cmpl",
            GenerationFormat::Chat => "chatcmpl",
        };
        Self { format, id: format!("{prefix}-{now}"), model, created: (now / 1_000_000_000) as u64, calls }
    }

    /// A whole answer: each choice's text, finish reason and log-probabilities, in order, and
    /// the call's usage.
    pub(super) fn whole(&self, choices: Vec<Finished>, usage: GenerationUsage) -> CompletionResponse {
        let choices = choices
            .into_iter()
            .enumerate()
            .map(|(index, Finished { text, reason, logprobs })| {
                let finish_reason = Some(finish(reason));
                match (self.format, self.answer(text)) {
                    (GenerationFormat::Completion, Answer::Text(text)) => {
                        Choice::Text { index, text, logprobs, finish_reason }
                    }
                    (_, Answer::Text(text)) => {
                        let message =
                            ChatText { role: ASSISTANT, content: Some(text), tool_calls: Vec::new() };
                        Choice::Message { index, message, logprobs, finish_reason }
                    }
                    (_, Answer::Calls { text, calls, left_open }) => {
                        let finish_reason =
                            Some(calls_finish(CallsEnd { reason, calls: calls.len(), left_open }));
                        let message = ChatText { role: ASSISTANT, content: text, tool_calls: calls };
                        Choice::Message { index, message, logprobs, finish_reason }
                    }
                }
            })
            .collect();
        self.response(self.object(false), choices, Some(usage))
    }

    /// One event of a stream: a piece of choice `index`'s text (and its token's
    /// log-probabilities), or (with `reason`) its last; a chat choice's `first` chunk names the
    /// role, as OpenAI's do (clients build the message from it).
    pub(super) fn chunk(
        &self,
        index: usize,
        first: bool,
        text: String,
        reason: Option<FinishReason>,
        logprobs: Option<ChoiceLogprobs>,
    ) -> CompletionResponse {
        let finish_reason = reason.map(finish);
        let choice = match self.format {
            GenerationFormat::Completion => Choice::Text { index, text, logprobs, finish_reason },
            GenerationFormat::Chat => {
                let delta = ChatDelta {
                    role: first.then_some(ASSISTANT),
                    content: Some(text),
                    tool_calls: Vec::new(),
                };
                Choice::Delta { index, delta, logprobs, finish_reason }
            }
        };
        self.response(self.object(true), vec![choice], None)
    }

    /// A scanner of each choice's calls as they are written, where the answer must be calls.
    pub(super) fn scanner(&self) -> Option<CallScanner> {
        self.calls.as_ref().and_then(CallReader::scanner)
    }

    /// A reader of each choice's text and calls as they come, where the answer may be either.
    pub(super) fn auto(&self) -> Option<AutoReader> {
        self.calls.as_ref().and_then(CallReader::auto)
    }

    /// A chunk of choice `index` carrying pieces of its calls (or, with `end`, its end).
    pub(super) fn calls_chunk(
        &self,
        index: usize,
        first: bool,
        tool_calls: Vec<ToolCallDelta>,
        end: Option<CallsEnd>,
    ) -> CompletionResponse {
        let delta = ChatDelta { role: first.then_some(ASSISTANT), content: None, tool_calls };
        let finish_reason = end.map(calls_finish);
        self.response(
            self.object(true),
            vec![Choice::Delta { index, delta, logprobs: None, finish_reason }],
            None,
        )
    }

    /// A choice's text as its answer: calls where the call offered tools and it holds some.
    fn answer(&self, text: String) -> Answer {
        CallReader::answer(self.calls.as_ref(), text)
    }

    pub(super) fn format(&self) -> GenerationFormat {
        self.format
    }

    /// A stream's last chunk when the call asked for its usage: no choices, the token counts.
    pub(super) fn usage_chunk(&self, usage: GenerationUsage) -> CompletionResponse {
        self.response(self.object(true), Vec::new(), Some(usage))
    }

    fn object(&self, streamed: bool) -> &'static str {
        match (self.format, streamed) {
            (GenerationFormat::Completion, _) => "text_completion",
            (GenerationFormat::Chat, false) => "chat.completion",
            (GenerationFormat::Chat, true) => "chat.completion.chunk",
        }
    }

    fn response(
        &self,
        object: &'static str,
        choices: Vec<Choice>,
        usage: Option<GenerationUsage>,
    ) -> CompletionResponse {
        CompletionResponse {
            id: self.id.clone(),
            object,
            created: self.created,
            model: self.model.clone(),
            choices,
            usage,
        }
    }
}
