//! text-embeddings-inference's tokenizer routes on an embedding server: `POST /tokenize`
//! (`inputs`, `add_special_tokens` default true: each input's tokens with their ids, text,
//! whether special, and byte offsets) and `POST /decode` (`ids`, `skip_special_tokens` default
//! true: each id list's text). Token ids from `/tokenize` embed as their text does
//! (`/v1/embeddings` and `/embed` take them as `input`).

use axum::Json;
use axum::extract::State;
use morph_encoder::TokenSpan;

use super::requests::{DecodeRequest, TokenizeRequest};
use super::{AppState, Body, parse, validate};
use crate::error::CallError;

/// text-embeddings-inference's tokenizer: each input's tokens.
#[utoipa::path(post, path = "/tokenize", tag = "embeddings", request_body = TokenizeRequest,
    responses((status = 200, description = "Per input, its tokens: {id, text, special, start, stop} \
        (byte offsets; null for a special token).", body = Vec<Vec<Object>>)))]
pub(super) async fn tokenize(
    State(state): State<AppState>,
    Body(body): Body,
) -> Result<Json<Vec<Vec<TokenSpan>>>, CallError> {
    state
        .drain
        .or_deadline(async {
            let embedder = state.embedder()?;
            let (texts, add_special) = validate::tokenize(parse(&body)?, state.max_client_batch)?;
            Ok(Json(embedder.spans(texts, add_special).await?))
        })
        .await
}

/// text-embeddings-inference's detokenizer: each id list's text.
#[utoipa::path(post, path = "/decode", tag = "embeddings", request_body = DecodeRequest,
    responses((status = 200, description = "A text per id list.", body = Vec<String>)))]
pub(super) async fn decode(
    State(state): State<AppState>,
    Body(body): Body,
) -> Result<Json<Vec<String>>, CallError> {
    state
        .drain
        .or_deadline(async {
            let embedder = state.embedder()?;
            let (ids, skip_special) = validate::decode(parse(&body)?, state.max_client_batch)?;
            Ok(Json(embedder.decode(ids, skip_special)?))
        })
        .await
}
