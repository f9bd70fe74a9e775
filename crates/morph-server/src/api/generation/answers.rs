//! The generation routes' answers (chat and completions, whole or as stream chunks).

use serde::Serialize;
use utoipa::ToSchema;

use super::logprobs::ChoiceLogprobs;

/// Token counts of a generation (`cached_tokens`: prompt tokens a kept KV cache held).
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub(crate) struct GenerationUsage {
    pub prompt_tokens: usize,
    pub prompt_tokens_details: CachedTokens,
    pub completion_tokens: usize,
    pub total_tokens: usize,
}

#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub(crate) struct CachedTokens {
    pub cached_tokens: usize,
}

impl GenerationUsage {
    pub(crate) fn new(prompt_tokens: usize, cached_tokens: usize, completion_tokens: usize) -> Self {
        Self {
            prompt_tokens,
            prompt_tokens_details: CachedTokens { cached_tokens },
            completion_tokens,
            total_tokens: prompt_tokens + completion_tokens,
        }
    }

    /// What choice `choice` of a call of `n` choices a prompt adds to the call's usage: OpenAI
    /// counts a prompt once however many choices it has, so its later choices add their
    /// completion tokens only.
    pub(crate) fn of_choice(self, choice: usize, n: usize) -> Self {
        match choice % n.max(1) {
            0 => self,
            _ => Self::new(0, 0, self.completion_tokens),
        }
    }

    /// The usage of a call of several choices: their counts summed.
    pub(crate) fn add(self, other: Self) -> Self {
        Self::new(
            self.prompt_tokens + other.prompt_tokens,
            self.prompt_tokens_details.cached_tokens + other.prompt_tokens_details.cached_tokens,
            self.completion_tokens + other.completion_tokens,
        )
    }
}

impl Default for GenerationUsage {
    fn default() -> Self {
        Self::new(0, 0, 0)
    }
}

/// A whole completion (`object` "text_completion" or "chat.completion") or one chunk of a stream
/// ("text_completion" or "chat.completion.chunk": one choice's piece, or no choice and the usage).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct CompletionResponse {
    pub id: String,
    pub object: &'static str,
    pub created: u64,
    pub model: String,
    pub choices: Vec<Choice>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<GenerationUsage>,
}

/// A choice of a completion (or a piece of one, in a stream), in the shape of its format, with
/// its tokens' log-probabilities when the call asked for them.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub(crate) enum Choice {
    Text {
        index: usize,
        text: String,
        logprobs: Option<ChoiceLogprobs>,
        finish_reason: Option<&'static str>,
    },
    Message {
        index: usize,
        message: ChatText,
        logprobs: Option<ChoiceLogprobs>,
        finish_reason: Option<&'static str>,
    },
    Delta {
        index: usize,
        delta: ChatDelta,
        logprobs: Option<ChoiceLogprobs>,
        finish_reason: Option<&'static str>,
    },
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ChatText {
    pub role: &'static str,
    /// The answer's text; null when it is calls only.
    pub content: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallOut>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ChatDelta {
    /// On a choice's first chunk only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallDelta>,
}

/// A piece of a call in a stream: its first names it (`id`, `type`, `function.name`), the
/// others carry more of its arguments.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct ToolCallDelta {
    pub index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
    pub function: FunctionDelta,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct FunctionDelta {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub arguments: String,
}

impl ToolCallDelta {
    /// Call `index`'s first piece: its id and name, and `arguments` so far.
    pub(crate) fn begin(index: usize, id: String, name: String, arguments: String) -> Self {
        Self {
            index,
            id: Some(id),
            kind: Some("function"),
            function: FunctionDelta { name: Some(name), arguments },
        }
    }

    /// More of call `index`'s arguments.
    pub(crate) fn more(index: usize, arguments: String) -> Self {
        Self { index, id: None, kind: None, function: FunctionDelta { name: None, arguments } }
    }
}

/// A call of a tool in an answer.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct ToolCallOut {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: FunctionCallOut,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct FunctionCallOut {
    pub name: String,
    /// The arguments as a string of JSON, as OpenAI's are.
    pub arguments: String,
}
