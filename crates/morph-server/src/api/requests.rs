//! The request body of each route, as sent: every field optional and leniently typed (see
//! [`super::fields`]), so that [`super::validate`] can name what is missing or wrong. Fields a
//! route does not know are ignored.

use serde::Deserialize;

use super::fields::{Flag, Messages, Number, Text, Texts};

/// `POST /v1/embeddings` (OpenAI).
#[derive(Debug, Deserialize)]
pub struct EmbeddingsRequest {
    pub input: Option<Texts>,
    pub model: Option<Text>,
    pub encoding_format: Option<Text>,
    /// Morph's extension: cut inputs longer than the longest runtime instead of refusing them.
    pub truncate: Option<Flag>,
}

/// `POST /embed` (text-embeddings-inference).
#[derive(Debug, Deserialize)]
pub struct EmbedRequest {
    pub inputs: Option<Texts>,
    /// Default true.
    pub normalize: Option<Flag>,
    /// Default false.
    pub truncate: Option<Flag>,
}

/// `POST /v1/classify`: inputs for one of the served tasks, with the service class a policy may
/// weigh.
#[derive(Debug, Deserialize)]
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
pub struct PredictRequest {
    pub task: Option<Text>,
    pub inputs: Option<Texts>,
    pub slo_ms: Option<Number>,
    pub utility: Option<Number>,
    pub truncate: Option<Flag>,
}

/// `POST /v1/completions` and `POST /v1/chat/completions` (OpenAI): a `prompt` or `messages`.
#[derive(Debug, Deserialize)]
pub struct GenerationRequest {
    pub prompt: Option<Texts>,
    pub messages: Option<Messages>,
    pub model: Option<Text>,
    /// Default 128.
    pub max_tokens: Option<Number>,
    /// Default 1; 0 is greedy.
    pub temperature: Option<Number>,
    /// Default 1.
    pub top_p: Option<Number>,
    /// Without one, every call samples afresh.
    pub seed: Option<Number>,
    /// Server-sent events, ending with `data: [DONE]`.
    pub stream: Option<Flag>,
}
