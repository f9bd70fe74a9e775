//! The bodies of a generation's answer in its format (a whole completion, or a stream's
//! chunks), and the metrics a finished generation records.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use morph_decoder::FinishReason;

use super::responses::{ChatDelta, ChatText, Choice, CompletionResponse, GenerationUsage};
use crate::infer::GenerationFormat;
use crate::metrics::Metrics;

/// A finished generation's metrics: its prompt tokens (and those cached), and its time per output
/// token after the first (at `first_at`).
pub(super) fn observe_done(
    metrics: &Metrics,
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
pub(super) struct Reply {
    format: GenerationFormat,
    id: String,
    model: String,
}

impl Reply {
    /// The bodies of a call of `format` to `model`.
    pub(super) fn new(format: GenerationFormat, model: String) -> Self {
        Self { format, id: format!("cmpl-{}", unix_nanos()), model }
    }

    fn created() -> u64 {
        (unix_nanos() / 1_000_000_000) as u64
    }

    pub(super) fn whole(
        &self,
        text: String,
        reason: FinishReason,
        usage: GenerationUsage,
    ) -> CompletionResponse {
        let finish_reason = Some(finish(reason));
        let (object, choice) = match self.format {
            GenerationFormat::Completion => {
                ("text_completion", Choice::Text { index: 0, text, logprobs: None, finish_reason })
            }
            GenerationFormat::Chat => (
                "chat.completion",
                Choice::Message {
                    index: 0,
                    message: ChatText { role: "assistant", content: text },
                    finish_reason,
                },
            ),
        };
        self.response(object, choice, Some(usage))
    }

    /// One event of a stream: a piece of text, or (with `reason`) the last.
    pub(super) fn chunk(
        &self,
        text: String,
        reason: Option<FinishReason>,
        usage: Option<GenerationUsage>,
    ) -> CompletionResponse {
        let finish_reason = reason.map(finish);
        let (object, choice) = match self.format {
            GenerationFormat::Completion => {
                ("text_completion", Choice::TextChunk { index: 0, text, finish_reason })
            }
            GenerationFormat::Chat => (
                "chat.completion.chunk",
                Choice::Delta { index: 0, delta: ChatDelta { content: text }, finish_reason },
            ),
        };
        self.response(object, choice, usage)
    }

    fn response(
        &self,
        object: &'static str,
        choice: Choice,
        usage: Option<GenerationUsage>,
    ) -> CompletionResponse {
        CompletionResponse {
            id: self.id.clone(),
            object,
            created: Self::created(),
            model: self.model.clone(),
            choices: [choice],
            usage,
        }
    }
}
