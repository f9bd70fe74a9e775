//! Cohere's routes, which its SDKs and the frameworks built on them call: `POST /v2/rerank` (on
//! a cross-encoder: the documents best first, each cut to `max_tokens_per_doc`), and `POST
//! /v2/embed` and `POST /v1/embed` (on an embedding model: the unit vectors in each of the
//! `embedding_types` asked for).

mod embedding_types;
pub(super) mod requests;
mod validate;

use axum::Json;
use axum::extract::State;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::fields::Number;
use super::opening::{Check, Checked, Encoder};
use super::scores::answers::{DocumentRank, DocumentText};
use super::scores::rerank;
use crate::error::CallError;
use crate::infer::{EmbedInputs, Embedder, Truncation, ValidEmbed};
use embedding_types::EmbeddingType;
use requests::{
    CohereEmbedRequest, CohereEmbedResponse, CohereMeta, CohereRerankRequest, CohereRerankResponse,
};
use validate::CohereEmbed;

/// The family's routes, each with its OpenAPI entry.
pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(rerank_v2)).routes(routes!(embed_v2)).routes(routes!(embed_v1))
}

/// Cohere's reranking, version 2.
#[utoipa::path(post, path = "/v2/rerank", tag = "reranking", request_body = CohereRerankRequest,
    responses((status = 200, description = "The documents best first.", body = CohereRerankResponse)))]
pub(super) async fn rerank_v2(
    State(state): State<AppState>,
    Encoder(embedder): Encoder,
    Checked(mut call): Checked<CohereRerankRequest>,
) -> Result<Json<CohereRerankResponse>, CallError> {
    let sent = std::mem::take(&mut call.documents);
    let max = call.max_tokens_per_doc;
    let documents = cut(&embedder, sent.clone(), "max_tokens_per_doc", max, Truncation::End).await?;
    let call = call.on(documents).check(&state)?;
    let (ranks, tokens) = rerank::ranked(&embedder, call.score, call.top_n).await?;
    let document = |i: usize| call.return_texts.then(|| DocumentText { text: sent[i].clone() });
    let results = ranks.into_iter().map(|(index, relevance_score)| DocumentRank {
        index,
        relevance_score,
        document: document(index),
    });
    Ok(Json(CohereRerankResponse {
        id: format!("rerank-{:016x}", rand::random::<u64>()),
        results: results.collect(),
        meta: CohereMeta::new("2", tokens),
    }))
}

/// Cohere's embeddings, version 2: the vectors by type.
#[utoipa::path(post, path = "/v2/embed", tag = "embeddings", request_body = CohereEmbedRequest,
    responses((status = 200, description = "The vectors by type.", body = CohereEmbedResponse)))]
pub(super) async fn embed_v2(
    Encoder(embedder): Encoder,
    Checked(call): Checked<CohereEmbedRequest>,
) -> Result<Json<CohereEmbedResponse>, CallError> {
    embed(&embedder, call, "2").await
}

/// Cohere's embeddings, version 1: floats, or by type when `embedding_types` is given.
#[utoipa::path(post, path = "/v1/embed", operation_id = "embed_v1", tag = "embeddings",
    request_body = CohereEmbedRequest,
    responses((status = 200, description = "The vectors.", body = CohereEmbedResponse)))]
pub(super) async fn embed_v1(
    Encoder(embedder): Encoder,
    Checked(call): Checked<CohereEmbedRequest>,
) -> Result<Json<CohereEmbedResponse>, CallError> {
    embed(&embedder, call, "1").await
}

async fn embed(
    embedder: &Embedder,
    call: CohereEmbed,
    version: &'static str,
) -> Result<Json<CohereEmbedResponse>, CallError> {
    let CohereEmbed { texts, max_tokens, truncate, types } = call;
    let cut = cut(embedder, texts.clone(), "max_tokens", max_tokens, truncate).await?;
    let call = ValidEmbed { inputs: EmbedInputs::Texts(cut), field: "texts", truncate, normalize: true };
    let embedded = embedder.embed(call).await?;
    let (response_type, embeddings) = match (version, types) {
        ("1", None) => ("embeddings_floats", serde_json::json!(embedded.vectors)),
        (_, types) => {
            let types = types.unwrap_or_else(|| vec![EmbeddingType::Float]);
            let by_type = types.iter().map(|t| (t.name().to_string(), t.encode(&embedded.vectors)));
            ("embeddings_by_type", serde_json::Value::Object(by_type.collect()))
        }
    };
    Ok(Json(CohereEmbedResponse {
        id: format!("embed-{:016x}", rand::random::<u64>()),
        response_type,
        embeddings,
        texts,
        meta: CohereMeta::new(version, embedded.tokens),
    }))
}

/// `texts` each cut to `max` tokens (the field `field`), when given: its last where `truncate`
/// cuts its start, else its first.
async fn cut(
    embedder: &Embedder,
    texts: Vec<String>,
    field: &str,
    max: Option<Number>,
    truncate: Truncation,
) -> Result<Vec<String>, CallError> {
    let Some(Number(max)) = max else { return Ok(texts) };
    if max < 1.0 || max.fract() != 0.0 {
        return Err(CallError::validation(field, "must be a whole number of tokens, at least 1"));
    }
    let max = max as usize;
    let spans = embedder.spans(texts.clone(), false).await?;
    // The offsets are bytes of the text; a cut never falls inside a character.
    Ok(texts
        .into_iter()
        .zip(spans)
        .map(|(text, spans)| match truncate {
            _ if spans.len() <= max => text,
            Truncation::Start => match spans[spans.len() - max].start {
                Some(start) => {
                    let start = (start.min(text.len())..=text.len()).find(|&s| text.is_char_boundary(s));
                    text[start.unwrap_or(text.len())..].to_string()
                }
                None => text,
            },
            Truncation::End | Truncation::Refuse => match spans[max - 1].stop {
                Some(end) => {
                    let end = (0..=end.min(text.len())).rev().find(|&e| text.is_char_boundary(e));
                    text[..end.unwrap_or(0)].to_string()
                }
                None => text,
            },
        })
        .collect())
}
