//! TEI's own routes' bodies: Vertex AI's shape, `/tokenize` and `/decode`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::bounds::switch;
use crate::api::field_schemas::{instances, token_ids};
use crate::api::field_types::{AddSpecialTokens, SkipSpecialTokens};
use crate::api::fields::{Flag, Inputs, Text, Texts};

/// `POST /vertex` (Vertex AI's prediction shape, as TEI serves it): each instance is a body for
/// `POST /`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct VertexRequest {
    #[schema(schema_with = instances, required = true)]
    pub instances: Option<Vec<serde_json::Value>>,
}

/// `POST /tokenize` (text-embeddings-inference).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TokenizeRequest {
    #[schema(required = true, nullable = false)]
    pub inputs: Option<Texts>,
    #[schema(schema_with = switch::<AddSpecialTokens>)]
    pub add_special_tokens: Option<Flag>,
    /// One of the model's prompts, put before each text as `/embed` puts it (else the server's
    /// default): the tokens are those the text embeds as.
    #[schema(value_type = Option<String>)]
    pub prompt_name: Option<Text>,
}

/// `POST /decode` (text-embeddings-inference).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DecodeRequest {
    #[schema(schema_with = token_ids, required = true)]
    pub ids: Option<Inputs>,
    #[schema(schema_with = switch::<SkipSpecialTokens>)]
    pub skip_special_tokens: Option<Flag>,
}

/// `POST /vertex`: each instance's answer, as `POST /` gives it.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct VertexResponse {
    /// Each as `POST /` answers it (`/embed`'s vectors, `/predict`'s scores, …).
    #[schema(value_type = Vec<Value>)]
    pub predictions: Vec<Box<serde_json::value::RawValue>>,
}
