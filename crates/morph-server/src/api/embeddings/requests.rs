//! The embedding routes' bodies as sent (see [`crate::api::fields`] for the lenient field types).

use serde::Deserialize;
use utoipa::ToSchema;
use utoipa::openapi::{RefOr, Schema};

use crate::api::bounds::switch;
use crate::api::field_schemas::{one_of_names, right_or_left, sentences};
use crate::api::field_types::{Normalize, Truncate};
use crate::api::fields::{Flag, Inputs, Number, Text, Texts};

/// `POST /v1/embeddings` (OpenAI).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct EmbeddingsRequest {
    #[schema(required = true, nullable = false)]
    pub input: Option<Inputs>,
    #[schema(value_type = Option<String>)]
    pub model: Option<Text>,
    #[schema(schema_with = encoding_format)]
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
    #[schema(required = true, nullable = false)]
    pub inputs: Option<Inputs>,
    #[schema(schema_with = switch::<Normalize>)]
    pub normalize: Option<Flag>,
    #[schema(schema_with = switch::<Truncate>)]
    pub truncate: Option<Flag>,
    #[schema(schema_with = right_or_left)]
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
    #[schema(required = true, nullable = false)]
    pub inputs: Option<SimilarityInputs>,
    #[schema(schema_with = switch::<Truncate>)]
    pub truncate: Option<Flag>,
    #[schema(schema_with = right_or_left)]
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
    #[schema(schema_with = right_or_left)]
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
    #[schema(value_type = String, required = true, min_length = 1)]
    pub source_sentence: Option<Text>,
    #[schema(schema_with = sentences, required = true)]
    pub sentences: Option<Texts>,
}

/// `encoding_format`: `float` (the default) or `base64` (little-endian f32s, what the OpenAI SDK
/// asks for).
fn encoding_format() -> RefOr<Schema> {
    one_of_names(
        &["float", "base64"],
        "`float` (the default) or `base64` (little-endian f32s, what the OpenAI SDK asks for).",
    )
}
