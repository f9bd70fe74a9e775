//! The classification and reranking routes' bodies as sent.

use serde::Deserialize;
use utoipa::ToSchema;
use utoipa::openapi::{RefOr, Schema};

use super::pair_fields::{Document, PredictInputs};
use crate::api::bounds::{bounded, switch};
use crate::api::field_schemas::{documents, one_of_names, right_only};
use crate::api::field_types::{RawScores, ReturnDocuments, ReturnText, SloMs, TopN, Truncate, Utility};
use crate::api::fields::{Flag, Number, Text, Texts};

/// `POST /v1/classify`: inputs for one of the served tasks, with the service class a policy may
/// weigh.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ClassifyRequest {
    #[schema(value_type = String, required = true, min_length = 1)]
    pub task: Option<Text>,
    #[schema(required = true, nullable = false)]
    pub input: Option<Texts>,
    #[schema(schema_with = bounded::<SloMs>)]
    pub slo_ms: Option<Number>,
    #[schema(schema_with = bounded::<Utility>)]
    pub utility: Option<Number>,
    #[schema(schema_with = switch::<Truncate>)]
    pub truncate: Option<Flag>,
}

/// `POST /predict` (text-embeddings-inference's shape): on a sequence-classification model, its
/// own labels for texts or pairs; on the encoder OTAS's heads read, as [`ClassifyRequest`] with
/// `inputs`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PredictRequest {
    /// One of Morph's task heads (only where the server carries them).
    #[schema(value_type = Option<String>)]
    pub task: Option<Text>,
    /// A string, a pair `[text, text]`, or a batch of `[text]` and `[text, text]` (an array of
    /// other lengths is a batch of texts for a task head).
    #[schema(required = true, nullable = false)]
    pub inputs: Option<PredictInputs>,
    #[schema(schema_with = bounded::<SloMs>)]
    pub slo_ms: Option<Number>,
    #[schema(schema_with = bounded::<Utility>)]
    pub utility: Option<Number>,
    #[schema(schema_with = switch::<Truncate>)]
    pub truncate: Option<Flag>,
    #[schema(schema_with = switch::<RawScores>)]
    pub raw_scores: Option<Flag>,
    #[schema(schema_with = right_only)]
    pub truncation_direction: Option<Text>,
    /// The Hugging Face inference API's parameters (what `InferenceClient.text_classification` sends).
    pub parameters: Option<PredictParameters>,
}

/// `/predict`'s `parameters`, as Hugging Face's text-classification task names them.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PredictParameters {
    /// The best this many labels; all when absent.
    #[schema(schema_with = bounded::<TopN>)]
    pub top_k: Option<Number>,
    #[schema(schema_with = function_to_apply)]
    pub function_to_apply: Option<Text>,
}

/// `POST /rerank` (text-embeddings-inference): the texts ranked by their relevance to the query.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RerankRequest {
    #[schema(value_type = String, required = true, min_length = 1)]
    pub query: Option<Text>,
    #[schema(required = true, nullable = false)]
    pub texts: Option<Texts>,
    #[schema(schema_with = switch::<Truncate>)]
    pub truncate: Option<Flag>,
    #[schema(schema_with = switch::<RawScores>)]
    pub raw_scores: Option<Flag>,
    #[schema(schema_with = switch::<ReturnText>)]
    pub return_text: Option<Flag>,
    #[schema(schema_with = right_only)]
    pub truncation_direction: Option<Text>,
}

/// `POST /v1/rerank` (Cohere's and Jina's shape, which LiteLLM and llama-index send).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DocumentRerankRequest {
    #[schema(value_type = Option<String>)]
    pub model: Option<Text>,
    #[schema(value_type = String, required = true, min_length = 1)]
    pub query: Option<Text>,
    #[schema(schema_with = documents, required = true)]
    pub documents: Option<Vec<Document>>,
    #[schema(schema_with = bounded::<TopN>)]
    pub top_n: Option<Number>,
    #[schema(schema_with = switch::<ReturnDocuments>)]
    pub return_documents: Option<Flag>,
    #[schema(schema_with = switch::<Truncate>)]
    pub truncate: Option<Flag>,
}

/// `function_to_apply`: `softmax`, `sigmoid` or `none` (the logits); the head's own when absent.
fn function_to_apply() -> RefOr<Schema> {
    one_of_names(
        &["softmax", "sigmoid", "none"],
        "`softmax`, `sigmoid` or `none` (the logits); the head's own when absent.",
    )
}
