//! The bodies of Cohere's routes (`/v2/rerank`, `/v2/embed`, `/v1/embed`) as Cohere's SDKs
//! send them, and their answers; every field Morph does not honour is refused by name.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa::openapi::{RefOr, Schema};

use super::embedding_types::EmbeddingType;
use crate::api::bounds::bounded;
use crate::api::field_schemas::{names_or_list, one_of_names, vectors_by_type_or_floats};
use crate::api::field_types::{TokensPerDocument, TokensPerText, TopN};
use crate::api::fields::{Flag, Number, Text, Texts};
use crate::api::scores::answers::DocumentRank;

/// The most `embedding_types` one call asks for (each type once).
pub(super) const EMBEDDING_TYPES: usize = 6;

/// Cohere's input types: each puts the model's prompt for it before a text, where the model has
/// one ([`crate::prompts::ServedPrompts::for_input_type`]).
pub(super) const INPUT_TYPES: [&str; 4] = ["search_document", "search_query", "classification", "clustering"];

/// Cohere's `truncate` values.
const TRUNCATIONS: [&str; 3] = ["END", "START", "NONE"];

/// `POST /v2/rerank` (`cohere.ClientV2.rerank`, LiteLLM's `rerank(model="cohere/…")`,
/// llama-index's `CohereRerank`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CohereRerankRequest {
    #[schema(value_type = Option<String>)]
    pub model: Option<Text>,
    #[schema(value_type = String, required = true, min_length = 1)]
    pub query: Option<Text>,
    #[schema(required = true, nullable = false)]
    pub documents: Option<Texts>,
    #[schema(schema_with = bounded::<TopN>)]
    pub top_n: Option<Number>,
    #[schema(schema_with = bounded::<TokensPerDocument>)]
    pub max_tokens_per_doc: Option<Number>,
    /// Each result carries its document as sent (Cohere's version 1 took it; LiteLLM sends it
    /// to version 2 too).
    #[schema(value_type = Option<bool>)]
    pub return_documents: Option<Flag>,
}

/// `POST /v2/embed` (`cohere.ClientV2.embed`) and `POST /v1/embed` (`cohere.Client.embed`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CohereEmbedRequest {
    #[schema(value_type = Option<String>)]
    pub model: Option<Text>,
    #[schema(required = true, nullable = false)]
    pub texts: Option<Texts>,
    #[schema(schema_with = input_type)]
    pub input_type: Option<Text>,
    #[schema(schema_with = embedding_types)]
    pub embedding_types: Option<Texts>,
    #[schema(schema_with = truncate)]
    pub truncate: Option<Text>,
    #[schema(schema_with = bounded::<TokensPerText>)]
    pub max_tokens: Option<Number>,
    /// Only the model's own dimension.
    #[schema(value_type = Option<u32>)]
    pub output_dimension: Option<Number>,
}

/// `/v2/rerank`'s answer: the documents best first.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct CohereRerankResponse {
    pub id: String,
    /// Each with its document where `return_documents` asked for it.
    pub results: Vec<DocumentRank>,
    pub meta: CohereMeta,
}

/// The API version answered and the tokens the call read.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct CohereMeta {
    pub api_version: CohereVersion,
    pub billed_units: CohereUnits,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct CohereVersion {
    pub version: &'static str,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct CohereUnits {
    pub input_tokens: usize,
}

impl CohereMeta {
    pub(crate) fn new(version: &'static str, input_tokens: usize) -> Self {
        Self { api_version: CohereVersion { version }, billed_units: CohereUnits { input_tokens } }
    }
}

/// `/v2/embed`'s and `/v1/embed`'s answer: the vectors by type (`embeddings_by_type`), or, on
/// `/v1/embed` without `embedding_types`, as floats (`embeddings_floats`).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct CohereEmbedResponse {
    pub id: String,
    pub response_type: &'static str,
    #[schema(schema_with = vectors_by_type_or_floats)]
    pub embeddings: serde_json::Value,
    pub texts: Vec<String>,
    pub meta: CohereMeta,
}

/// `input_type`: checked; the models served embed every kind alike (`--default-prompt-name`'s
/// prompt, if any, before each).
fn input_type() -> RefOr<Schema> {
    let about = "Checked; the models served embed every kind alike (`--default-prompt-name`'s prompt, \
        if any, before each).";
    one_of_names(&INPUT_TYPES, about)
}

/// `embedding_types`: one or more of Cohere's types (default `float`).
fn embedding_types() -> RefOr<Schema> {
    names_or_list(&EmbeddingType::names(), EMBEDDING_TYPES, "One or more types, each once (default `float`).")
}

/// Cohere's `truncate`.
fn truncate() -> RefOr<Schema> {
    let about = "`END` (the default: a long text's end is cut), `START` (its start is cut) or `NONE` (a \
        long text is refused).";
    one_of_names(&TRUNCATIONS, about)
}
