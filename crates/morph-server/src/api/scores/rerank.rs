//! Reranking on a cross-encoder checkpoint (one relevance output): text-embeddings-inference's
//! `POST /rerank` (`query`, `texts`; answered `[{index, score, text?}]` best first) and Cohere's
//! and Jina's `POST /v1/rerank` (`query`, `documents`, `top_n`, `return_documents`; answered
//! `{results: [{index, relevance_score, document?}]}` best first). Each (query, text) pair runs
//! through the policy as one input.

use axum::Json;
use axum::extract::State;

use super::answers::{DocumentRank, DocumentRerankResponse, DocumentText, Rank};
use super::requests::{DocumentRerankRequest, RerankRequest};
use super::validate::ValidRerank;
use crate::api::AppState;
use crate::api::answers::Usage;
use crate::api::opening::{Checked, Encoder};
use crate::error::CallError;
use crate::infer::{Embedder, ModelKind, ValidScore};

/// The texts' indices and scores by `score`, best first (the first `top_n`), and the call's
/// token count.
pub(crate) async fn ranked(
    embedder: &Embedder,
    score: ValidScore,
    top_n: Option<usize>,
) -> Result<(Vec<(usize, f32)>, usize), CallError> {
    let served = match embedder.kind() {
        ModelKind::Reranker => None,
        ModelKind::Classifier => {
            Some("a classifier of several labels, no reranker (a cross-encoder has one output): use /predict")
        }
        ModelKind::Embedding => Some("embeddings, no reranker: use /embed or /v1/embeddings"),
    };
    if let Some(served) = served {
        return Err(CallError::WrongEndpoint { served });
    }
    let scored = embedder.score(score).await?;
    let mut ranks: Vec<(usize, f32)> = scored.scores.iter().map(|s| s[0]).enumerate().collect();
    ranks.sort_by(|a, b| b.1.total_cmp(&a.1));
    ranks.truncate(top_n.unwrap_or(ranks.len()));
    Ok((ranks, scored.tokens))
}

/// text-embeddings-inference's reranking.
#[utoipa::path(post, path = "/rerank", tag = "reranking", request_body = RerankRequest,
    responses((status = 200, description = "The texts best first.", body = Vec<Rank>)))]
pub(crate) async fn rerank(
    Encoder(embedder): Encoder,
    Checked(call): Checked<RerankRequest>,
) -> Result<Json<Vec<Rank>>, CallError> {
    let ValidRerank { score, texts, return_texts, top_n } = call;
    let (ranks, _) = ranked(&embedder, score, top_n).await?;
    let text = |i: usize| return_texts.then(|| texts[i].clone());
    Ok(Json(ranks.into_iter().map(|(index, score)| Rank { index, text: text(index), score }).collect()))
}

/// Cohere's and Jina's reranking.
#[utoipa::path(post, path = "/v1/rerank", operation_id = "rerank_documents", tag = "reranking",
    request_body = DocumentRerankRequest,
    responses((status = 200, description = "The documents best first.", body = DocumentRerankResponse)))]
pub(super) async fn documents(
    State(state): State<AppState>,
    Encoder(embedder): Encoder,
    Checked(call): Checked<DocumentRerankRequest>,
) -> Result<Json<DocumentRerankResponse>, CallError> {
    let ValidRerank { score, texts, return_texts, top_n } = call;
    let (ranks, tokens) = ranked(&embedder, score, top_n).await?;
    let document = |i: usize| return_texts.then(|| DocumentText { text: texts[i].clone() });
    let results = ranks
        .into_iter()
        .map(|(index, relevance_score)| DocumentRank { index, relevance_score, document: document(index) })
        .collect();
    Ok(Json(DocumentRerankResponse {
        id: format!("rerank-{:016x}", rand::random::<u64>()),
        model: state.model.name().to_string(),
        results,
        usage: Usage::of(tokens),
    }))
}
