//! The request body of each route, as sent: every field optional and leniently typed (see
//! [`super::fields`]), so that [`super::validate`] can name what is missing or wrong. A field a
//! route does not honour is refused by name (`deny_unknown_fields`); docs/api.md lists every
//! OpenAI field and what Morph does with it.

use serde::Deserialize;

use super::fields::{Flag, Inputs, Messages, Number, Text, Texts};

/// `POST /v1/embeddings` (OpenAI).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingsRequest {
    pub input: Option<Inputs>,
    pub model: Option<Text>,
    /// `float` (default) or `base64` (little-endian f32s, what the OpenAI SDK asks for).
    pub encoding_format: Option<Text>,
    /// The vector's size: only the model's own (its vectors were not trained to be cut).
    pub dimensions: Option<Number>,
    /// The caller's end user, written to the call's log line.
    pub user: Option<Text>,
    /// Morph's extension: cut inputs longer than the longest runtime instead of refusing them.
    pub truncate: Option<Flag>,
}

/// `POST /embed` (text-embeddings-inference).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbedRequest {
    pub inputs: Option<Inputs>,
    /// Default true.
    pub normalize: Option<Flag>,
    /// Default false.
    pub truncate: Option<Flag>,
}

/// `POST /v1/classify`: inputs for one of the served tasks, with the service class a policy may
/// weigh.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassifyRequest {
    pub task: Option<Text>,
    pub input: Option<Texts>,
    /// The answer's deadline, in ms from arrival.
    pub slo_ms: Option<Number>,
    /// What an answer in time is worth to the caller (default 1).
    pub utility: Option<Number>,
    pub truncate: Option<Flag>,
}

/// `POST /predict` (text-embeddings-inference's shape): as [`ClassifyRequest`], `inputs`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PredictRequest {
    pub task: Option<Text>,
    pub inputs: Option<Texts>,
    pub slo_ms: Option<Number>,
    pub utility: Option<Number>,
    pub truncate: Option<Flag>,
}

/// `POST /v1/completions` (`prompt`) and `POST /v1/chat/completions` (`messages`), OpenAI.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GenerationRequest {
    /// A prompt, or several (a choice for each, `n` per prompt).
    pub prompt: Option<Texts>,
    pub messages: Option<Messages>,
    pub model: Option<Text>,
    /// Default 128; `max_completion_tokens` is OpenAI's newer name for it.
    pub max_tokens: Option<Number>,
    pub max_completion_tokens: Option<Number>,
    /// Default 1; 0 is greedy.
    pub temperature: Option<Number>,
    /// Default 1.
    pub top_p: Option<Number>,
    /// Default 0 (off): not OpenAI's, llama-server's and vLLM's.
    pub top_k: Option<Number>,
    /// Default 0 (off): not OpenAI's, llama-server's and vLLM's.
    pub min_p: Option<Number>,
    pub presence_penalty: Option<Number>,
    pub frequency_penalty: Option<Number>,
    /// Without one, every call samples afresh.
    pub seed: Option<Number>,
    /// Choices per prompt (default 1).
    pub n: Option<Number>,
    /// Up to 4 strings; the text ends before the first to appear.
    pub stop: Option<Texts>,
    /// Server-sent events, ending with `data: [DONE]`.
    pub stream: Option<Flag>,
    pub stream_options: Option<StreamOptions>,
    /// `{"type": "text"}`; JSON modes are refused by name.
    pub response_format: Option<serde_json::Value>,
    /// Refused when asked for (`true`, or a number of them).
    pub logprobs: Option<serde_json::Value>,
    pub top_logprobs: Option<Number>,
    /// The caller's end user, written to the call's log line.
    pub user: Option<Text>,
}

/// `stream_options`: `include_usage` adds a last chunk with the call's token counts.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamOptions {
    pub include_usage: Option<Flag>,
}

/// `POST /tokenize` (text-embeddings-inference).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenizeRequest {
    pub inputs: Option<Texts>,
    /// Default true.
    pub add_special_tokens: Option<Flag>,
}

/// `POST /decode` (text-embeddings-inference).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecodeRequest {
    /// An array of token ids, or an array of them.
    pub ids: Option<Inputs>,
    /// Default true.
    pub skip_special_tokens: Option<Flag>,
}
