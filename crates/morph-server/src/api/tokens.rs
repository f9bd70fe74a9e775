//! text-embeddings-inference's tokenizer routes on an embedding server: `POST /tokenize`
//! (`inputs`, `add_special_tokens` default true: each input's tokens with their ids, text,
//! whether special, and byte offsets) and `POST /decode` (`ids`, `skip_special_tokens` default
//! true: each id list's text). Token ids from `/tokenize` embed as their text does
//! (`/v1/embeddings` and `/embed` take them as `input`).

use axum::Json;
use axum::extract::State;
use morph_encoder::TokenSpan;

use super::{AppState, Body, parse, validate};
use crate::error::CallError;

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
