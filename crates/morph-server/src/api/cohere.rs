//! Cohere's routes, which its SDKs and the frameworks built on them call: `POST /v2/rerank` (on
//! a cross-encoder: the documents best first, each cut to `max_tokens_per_doc`), and `POST
//! /v2/embed` and `POST /v1/embed` (on an embedding model: the unit vectors in each of the
//! `embedding_types` asked for).

use axum::Json;
use axum::extract::State;

use super::cohere_requests::{
    CohereEmbedRequest, CohereEmbedResponse, CohereMeta, CohereRerankRequest, CohereRerankResponse,
};
use super::embedding_types::EmbeddingType;
use super::fields::{Flag, Number, Text};
use super::pair_fields::Document;
use super::requests::DocumentRerankRequest;
use super::responses::{DocumentRank, DocumentText};
use super::validate::{served_model, texts};
use super::{AppState, Body, parse, rerank, validate_scores};
use crate::error::CallError;
use crate::infer::{EmbedInputs, Embedder, ValidEmbed};

/// Cohere's reranking, version 2.
#[utoipa::path(post, path = "/v2/rerank", tag = "reranking", request_body = CohereRerankRequest,
    responses((status = 200, description = "The documents best first.", body = CohereRerankResponse)))]
pub(super) async fn rerank_v2(
    State(state): State<AppState>,
    Body(body): Body,
) -> Result<Json<CohereRerankResponse>, CallError> {
    state
        .drain
        .or_deadline(async {
            let embedder = state.embedder()?;
            let r: CohereRerankRequest = parse(&body)?;
            let sent = texts("documents", r.documents, state.max_client_batch)?;
            let documents = cut(embedder, sent.clone(), "max_tokens_per_doc", r.max_tokens_per_doc).await?;
            // Cohere cuts a long pair rather than refusing it.
            let same = DocumentRerankRequest {
                model: r.model,
                query: r.query,
                documents: Some(documents.into_iter().map(Document).collect()),
                top_n: r.top_n,
                return_documents: r.return_documents,
                truncate: Some(Flag(true)),
            };
            let call = validate_scores::document_rerank(same, state.max_client_batch, &state.model.names)?;
            let (ranks, tokens) = rerank::ranked(embedder, call.score, call.top_n).await?;
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
        })
        .await
}

/// Cohere's embeddings, version 2: the vectors by type.
#[utoipa::path(post, path = "/v2/embed", tag = "embeddings", request_body = CohereEmbedRequest,
    responses((status = 200, description = "The vectors by type.", body = CohereEmbedResponse)))]
pub(super) async fn embed_v2(
    state: State<AppState>,
    body: Body,
) -> Result<Json<CohereEmbedResponse>, CallError> {
    embed(state, body, "2").await
}

/// Cohere's embeddings, version 1: floats, or by type when `embedding_types` is given.
#[utoipa::path(post, path = "/v1/embed", operation_id = "embed_v1", tag = "embeddings",
    request_body = CohereEmbedRequest,
    responses((status = 200, description = "The vectors.", body = CohereEmbedResponse)))]
pub(super) async fn embed_v1(
    state: State<AppState>,
    body: Body,
) -> Result<Json<CohereEmbedResponse>, CallError> {
    embed(state, body, "1").await
}

async fn embed(
    State(state): State<AppState>,
    Body(body): Body,
    version: &'static str,
) -> Result<Json<CohereEmbedResponse>, CallError> {
    state
        .drain
        .or_deadline(async {
            let embedder = state.embedder()?;
            let r: CohereEmbedRequest = parse(&body)?;
            served_model(r.model, &state.model.names)?;
            input_type(r.input_type)?;
            let truncate = truncate(r.truncate)?;
            let dimension = state.model.dim;
            if let Some(Number(n)) = r.output_dimension
                && n != dimension as f64
            {
                let message = format!("this model's vectors have {dimension} dimensions");
                return Err(CallError::validation("output_dimension", message));
            }
            let types = match r.embedding_types {
                None => None,
                Some(given) => Some(
                    texts("embedding_types", Some(given), EMBEDDING_TYPES)?
                        .iter()
                        .map(|t| {
                            EmbeddingType::parse(t).map_err(|e| CallError::validation("embedding_types", e))
                        })
                        .collect::<Result<Vec<_>, _>>()?,
                ),
            };
            let given = texts("texts", r.texts, state.max_client_batch)?;
            let cut = cut(embedder, given.clone(), "max_tokens", r.max_tokens).await?;
            let call =
                ValidEmbed { inputs: EmbedInputs::Texts(cut), field: "texts", truncate, normalize: true };
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
                texts: given,
                meta: CohereMeta::new(version, embedded.tokens),
            }))
        })
        .await
}

/// The most `embedding_types` one call asks for (each type once).
const EMBEDDING_TYPES: usize = 6;

/// Cohere's input types; the models served embed them alike.
const INPUT_TYPES: [&str; 4] = ["search_document", "search_query", "classification", "clustering"];

fn input_type(given: Option<Text>) -> Result<(), CallError> {
    match given {
        Some(Text(kind)) if !INPUT_TYPES.contains(&kind.as_str()) => Err(CallError::validation(
            "input_type",
            format!("{kind:?} is not one of {} (text only)", INPUT_TYPES.join(", ")),
        )),
        _ => Ok(()),
    }
}

/// Cohere's `truncate`: `END` (the default) cuts a long text's end, `NONE` refuses it.
fn truncate(given: Option<Text>) -> Result<bool, CallError> {
    match given.as_ref().map(|Text(t)| t.as_str()) {
        None | Some("END") => Ok(true),
        Some("NONE") => Ok(false),
        Some(_) => Err(CallError::validation(
            "truncate",
            "must be \"END\" or \"NONE\": Morph cuts a text's end only",
        )),
    }
}

/// `texts` each cut to its first `max` tokens (the field `field`), when given.
async fn cut(
    embedder: &Embedder,
    texts: Vec<String>,
    field: &str,
    max: Option<Number>,
) -> Result<Vec<String>, CallError> {
    let Some(Number(max)) = max else { return Ok(texts) };
    if max < 1.0 || max.fract() != 0.0 {
        return Err(CallError::validation(field, "must be a whole number of tokens, at least 1"));
    }
    let spans = embedder.spans(texts.clone(), false).await?;
    Ok(texts
        .into_iter()
        .zip(spans)
        .map(|(text, spans)| match spans.get(max as usize - 1).and_then(|s| s.stop) {
            Some(end) if spans.len() > max as usize => {
                // The offsets are bytes of the text; never cut inside a character.
                let end = (0..=end.min(text.len())).rev().find(|&e| text.is_char_boundary(e)).unwrap_or(0);
                text[..end].to_string()
            }
            _ => text,
        })
        .collect())
}
