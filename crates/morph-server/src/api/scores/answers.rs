//! The classification and reranking routes' answers.

use std::collections::BTreeMap;

use morph_core::TokenPlan;
use serde::Serialize;
use utoipa::ToSchema;

use crate::api::answers::Usage;

/// `POST /v1/classify`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ClassifyResponse {
    pub object: &'static str,
    pub task: String,
    pub model: String,
    pub data: Vec<Classification>,
    pub usage: Usage,
}

/// One input's answer: its label, every class's score, and the token plan its batch ran.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Classification {
    pub index: usize,
    pub label: String,
    pub scores: BTreeMap<String, f32>,
    /// The token plan its batch ran (OTAS), e.g. "plain" or "prune@4:0.5".
    #[schema(value_type = String)]
    pub plan: TokenPlan,
}

/// `POST /predict`: per input, every class's score best first; one list for a single input.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub(crate) enum PredictResponse {
    One(Vec<LabelScore>),
    Many(Vec<Vec<LabelScore>>),
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct LabelScore {
    pub label: String,
    pub score: f32,
}

/// A text's place in TEI's rerank answer (best first).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Rank {
    pub index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    pub score: f32,
}

/// `POST /v1/rerank` (Cohere's and Jina's shape): the documents best first.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DocumentRerankResponse {
    pub id: String,
    pub model: String,
    pub results: Vec<DocumentRank>,
    pub usage: Usage,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DocumentRank {
    pub index: usize,
    pub relevance_score: f32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub document: Option<DocumentText>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DocumentText {
    pub text: String,
}
