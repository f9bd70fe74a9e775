//! The bodies of Cohere's routes (`/v2/rerank`, `/v2/embed`, `/v1/embed`) as Cohere's SDKs
//! send them, and their answers; every field Morph does not honour is refused by name.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::bounds::bounded;
use crate::api::field_types::TopN;
use crate::api::fields::{Flag, Number, Text, Texts};
use crate::api::scores::answers::DocumentRank;

/// `POST /v2/rerank` (`cohere.ClientV2.rerank`, LiteLLM's `rerank(model="cohere/…")`,
/// llama-index's `CohereRerank`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CohereRerankRequest {
    #[schema(value_type = Option<String>)]
    pub model: Option<Text>,
    #[schema(value_type = Option<String>, required = true)]
    pub query: Option<Text>,
    /// Strings.
    #[schema(value_type = Vec<String>, required = true)]
    pub documents: Option<Texts>,
    #[schema(schema_with = bounded::<TopN>)]
    pub top_n: Option<Number>,
    /// Each document is cut to this many tokens before it is scored (default: the model's
    /// longest input, past which every pair is cut anyway).
    #[schema(value_type = Option<u32>)]
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
    #[schema(value_type = Vec<String>, required = true)]
    pub texts: Option<Texts>,
    /// `search_document`, `search_query`, `classification` or `clustering`: checked; the models
    /// served embed every kind alike (`--default-prompt-name`'s prompt, if any, before each).
    #[schema(value_type = Option<String>)]
    pub input_type: Option<Text>,
    /// Any of `float`, `int8`, `uint8`, `binary`, `ubinary`, `base64` (default `float`).
    #[schema(value_type = Option<Vec<String>>)]
    pub embedding_types: Option<Texts>,
    /// `END` (the default: a long text's end is cut) or `NONE` (a long text is refused); `START`
    /// is refused.
    #[schema(value_type = Option<String>)]
    pub truncate: Option<Text>,
    /// Each text is cut to this many tokens.
    #[schema(value_type = Option<u32>)]
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
    /// `{"float": [[…]], "int8": [[…]], …}`, or a list of float vectors.
    #[schema(value_type = Object)]
    pub embeddings: serde_json::Value,
    pub texts: Vec<String>,
    pub meta: CohereMeta,
}
