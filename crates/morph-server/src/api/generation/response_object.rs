//! The Responses API's response object: its output items (a message, function calls), usage and
//! ids, as `POST /v1/responses` answers whole and as its event stream builds it piece by piece.

use morph_decoder::FinishReason;
use serde::Serialize;
use utoipa::ToSchema;

use super::answers::{GenerationUsage, ToolCallOut};
use super::reply::unix_nanos;
use super::tool_reply::Answer;

/// A whole response.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ResponseObject {
    id: String,
    object: &'static str,
    created_at: u64,
    /// `completed`, or `incomplete` when the token limit cut it.
    status: &'static str,
    incomplete_details: Option<IncompleteDetails>,
    model: String,
    output: Vec<OutputItem>,
    /// `null` until the response is finished.
    usage: Option<ResponseUsage>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct IncompleteDetails {
    reason: &'static str,
}

/// An item of a response's output.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(untagged)]
pub(crate) enum OutputItem {
    Message(OutputMessage),
    FunctionCall(FunctionCallItem),
}

/// A call of a tool the call offered.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct FunctionCallItem {
    #[serde(rename = "type")]
    kind: &'static str,
    id: String,
    call_id: String,
    name: String,
    /// A string of JSON.
    arguments: String,
    status: &'static str,
}

impl FunctionCallItem {
    pub(super) fn new(call: ToolCallOut, status: &'static str) -> Self {
        Self {
            kind: "function_call",
            id: format!("fc_{}", call.id.trim_start_matches("call_")),
            call_id: call.id,
            name: call.function.name,
            arguments: call.function.arguments,
            status,
        }
    }

    /// The item as added to a stream, its arguments still to come.
    pub(super) fn begun(&self) -> Self {
        Self { arguments: String::new(), status: "in_progress", ..self.clone() }
    }

    pub(super) fn arguments(&self) -> &str {
        &self.arguments
    }

    /// More of the arguments, as they are written.
    pub(super) fn push_arguments(&mut self, more: &str) {
        self.arguments.push_str(more);
    }

    /// The item with its arguments whole, `status` as its response's.
    pub(super) fn done(&self, status: &'static str) -> Self {
        Self { status, ..self.clone() }
    }

    pub(super) fn id(&self) -> &str {
        &self.id
    }

    pub(super) fn status(&self) -> &'static str {
        self.status
    }
}

/// The assistant's message.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct OutputMessage {
    #[serde(rename = "type")]
    kind: &'static str,
    id: String,
    status: &'static str,
    role: &'static str,
    content: Vec<OutputText>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct OutputText {
    #[serde(rename = "type")]
    kind: &'static str,
    text: String,
    annotations: Vec<String>,
}

/// Token counts, as the Responses API names them.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ResponseUsage {
    input_tokens: usize,
    input_tokens_details: CachedInput,
    output_tokens: usize,
    output_tokens_details: Reasoning,
    total_tokens: usize,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct CachedInput {
    cached_tokens: usize,
}

/// No reasoning tokens: the models served answer directly.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Reasoning {
    reasoning_tokens: usize,
}

/// A response's names: its id, its message's, and when it was created.
#[derive(Debug, Clone)]
pub(super) struct ResponseIds {
    pub id: String,
    pub message: String,
    pub created_at: u64,
    pub model: String,
}

impl ResponseIds {
    pub(super) fn new(model: String) -> Self {
        let now = unix_nanos();
        Self {
            id: format!("resp_{now}"),
            message: format!("msg_{now}"),
            created_at: (now / 1_000_000_000) as u64,
            model,
        }
    }
}

impl OutputMessage {
    /// The assistant's message of `text`, `status` as its response's.
    pub(super) fn new(ids: &ResponseIds, status: &'static str, text: Option<String>) -> Self {
        let content = text.map(|text| OutputText { kind: "output_text", text, annotations: Vec::new() });
        Self {
            kind: "message",
            id: ids.message.clone(),
            status,
            role: "assistant",
            content: content.into_iter().collect(),
        }
    }
}

impl ResponseObject {
    /// A response begun and not finished: no output yet.
    pub(super) fn in_progress(ids: &ResponseIds) -> Self {
        Self {
            id: ids.id.clone(),
            object: "response",
            created_at: ids.created_at,
            status: "in_progress",
            incomplete_details: None,
            model: ids.model.clone(),
            output: Vec::new(),
            usage: None,
        }
    }

    /// The finished response: `answer` (cut short where `reason` says the limit cut it).
    pub(super) fn new(
        ids: &ResponseIds,
        answer: Answer,
        reason: FinishReason,
        usage: GenerationUsage,
    ) -> Self {
        let output = output_items(ids, Self::status(reason), answer);
        Self::with_output(ids, output, reason, usage)
    }

    /// `completed`, or `incomplete` where the limit cut the answer.
    pub(super) fn status(reason: FinishReason) -> &'static str {
        match reason {
            FinishReason::Length => "incomplete",
            FinishReason::Stop => "completed",
        }
    }

    /// The finished response of `output` (its calls streamed as they were written).
    pub(super) fn with_output(
        ids: &ResponseIds,
        output: Vec<OutputItem>,
        reason: FinishReason,
        usage: GenerationUsage,
    ) -> Self {
        let cut = reason == FinishReason::Length;
        Self {
            status: Self::status(reason),
            incomplete_details: cut.then_some(IncompleteDetails { reason: "max_output_tokens" }),
            output,
            usage: Some(ResponseUsage {
                input_tokens: usage.prompt_tokens,
                input_tokens_details: CachedInput {
                    cached_tokens: usage.prompt_tokens_details.cached_tokens,
                },
                output_tokens: usage.completion_tokens,
                output_tokens_details: Reasoning { reasoning_tokens: 0 },
                total_tokens: usage.total_tokens,
            }),
            ..Self::in_progress(ids)
        }
    }
}

/// A response's output: the message of a text answer, or any text and then one item per call.
pub(super) fn output_items(ids: &ResponseIds, status: &'static str, answer: Answer) -> Vec<OutputItem> {
    match answer {
        Answer::Text(text) => vec![OutputItem::Message(OutputMessage::new(ids, status, Some(text)))],
        Answer::Calls { text, calls, .. } => {
            let message = text.map(|text| OutputItem::Message(OutputMessage::new(ids, status, Some(text))));
            let calls =
                calls.into_iter().map(|call| OutputItem::FunctionCall(FunctionCallItem::new(call, status)));
            message.into_iter().chain(calls).collect()
        }
    }
}
