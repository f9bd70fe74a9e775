//! The embedding routes' bodies as sent (see [`crate::api::fields`] for the lenient field types).

use serde::Deserialize;
use utoipa::ToSchema;

use crate::api::bounds::switch;
use crate::api::field_types::{Normalize, Truncate};
use crate::api::fields::{Flag, Inputs, Number, Text, Texts};

/// `POST /v1/embeddings` (OpenAI).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct EmbeddingsRequest {
    #[schema(required = true)]
    pub input: Option<Inputs>,
    #[schema(value_type = Option<String>)]
    pub model: Option<Text>,
    /// `float` (default) or `base64` (little-endian f32s, what the OpenAI SDK asks for).
    #[schema(value_type = Option<String>)]
    pub encoding_format: Option<Text>,
    /// The vector's size: only the model's own (its vectors were not trained to be cut).
    #[schema(value_type = Option<u32>)]
    pub dimensions: Option<Number>,
    /// The caller's end user, written to the call's log line.
    #[schema(value_type = Option<String>)]
    pub user: Option<Text>,
    #[schema(schema_with = switch::<Truncate>)]
    pub truncate: Option<Flag>,
}

/// `POST /embed` (text-embeddings-inference).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct EmbedRequest {
    #[schema(required = true)]
    pub inputs: Option<Inputs>,
    #[schema(schema_with = switch::<Normalize>)]
    pub normalize: Option<Flag>,
    #[schema(schema_with = switch::<Truncate>)]
    pub truncate: Option<Flag>,
    /// TEI's side to cut from: `"right"` (the end, the default) or `"left"` (the start).
    #[schema(value_type = Option<String>)]
    pub truncation_direction: Option<Text>,
    /// One of the model's sentence-transformers prompts (`/info`'s `prompts`), put before each
    /// text; else the server's default, if any.
    #[schema(value_type = Option<String>)]
    pub prompt_name: Option<Text>,
    /// The vector's size: only the model's own (its vectors were not trained to be cut).
    #[schema(value_type = Option<u32>)]
    pub dimensions: Option<Number>,
}

/// `POST /similarity` (text-embeddings-inference): the cosine of each sentence's vector with the
/// source sentence's.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SimilarityRequest {
    #[schema(required = true)]
    pub inputs: Option<SimilarityInputs>,
    #[schema(schema_with = switch::<Truncate>)]
    pub truncate: Option<Flag>,
    /// TEI's side to cut from: `"right"` (the end, the default) or `"left"` (the start).
    #[schema(value_type = Option<String>)]
    pub truncation_direction: Option<Text>,
    /// The same settings as the Hugging Face inference API sends them (what
    /// `InferenceClient.sentence_similarity` sends).
    pub parameters: Option<SimilarityParameters>,
}

/// `/similarity`'s `parameters`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SimilarityParameters {
    #[schema(schema_with = switch::<Truncate>)]
    pub truncate: Option<Flag>,
    #[schema(value_type = Option<String>)]
    pub truncation_direction: Option<Text>,
    /// One of the model's sentence-transformers prompts (`/info`'s `prompts`), put before each
    /// text; else the server's default, if any.
    #[schema(value_type = Option<String>)]
    pub prompt_name: Option<Text>,
}

/// `/similarity`'s `inputs`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SimilarityInputs {
    #[schema(value_type = Option<String>, required = true)]
    pub source_sentence: Option<Text>,
    #[schema(required = true)]
    pub sentences: Option<Texts>,
}
