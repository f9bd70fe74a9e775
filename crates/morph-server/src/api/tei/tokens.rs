//! text-embeddings-inference's tokenizer routes on an embedding server: `POST /tokenize`
//! (`inputs`, `add_special_tokens` default true: each input's tokens with their ids, text,
//! whether special, and byte offsets) and `POST /decode` (`ids`, `skip_special_tokens` default
//! true: each id list's text). Token ids from `/tokenize` embed as their text does
//! (`/v1/embeddings` and `/embed` take them as `input`).

use axum::Json;
use morph_encoder::TokenSpan;

use super::requests::{DecodeRequest, TokenizeRequest};
use crate::api::AppState;
use crate::api::bounds::Switch;
use crate::api::checks::{inputs, texts};
use crate::api::field_types::{AddSpecialTokens, SkipSpecialTokens};
use crate::api::opening::{Check, Checked, Encoder};
use crate::error::CallError;
use crate::infer::EmbedInputs;

/// text-embeddings-inference's tokenizer: each input's tokens.
#[utoipa::path(post, path = "/tokenize", tag = "embeddings", request_body = TokenizeRequest,
    responses((status = 200, description = "Per input, its tokens: {id, text, special, start, stop} \
        (byte offsets; null for a special token).", body = Vec<Vec<Object>>)))]
pub(super) async fn tokenize(
    Encoder(embedder): Encoder,
    Checked((texts, add_special)): Checked<TokenizeRequest>,
) -> Result<Json<Vec<Vec<TokenSpan>>>, CallError> {
    Ok(Json(embedder.spans(texts, add_special).await?))
}

/// text-embeddings-inference's detokenizer: each id list's text.
#[utoipa::path(post, path = "/decode", tag = "embeddings", request_body = DecodeRequest,
    responses((status = 200, description = "A text per id list.", body = Vec<String>)))]
pub(super) async fn decode(
    Encoder(embedder): Encoder,
    Checked((ids, skip_special)): Checked<DecodeRequest>,
) -> Result<Json<Vec<String>>, CallError> {
    Ok(Json(embedder.decode(ids, skip_special)?))
}

/// `/tokenize`: the texts (with the prompt `/embed` would put before them), and whether to add
/// the special tokens.
impl Check for TokenizeRequest {
    type Valid = (Vec<String>, bool);

    fn check(self, state: &AppState) -> Result<Self::Valid, CallError> {
        let texts = texts("inputs", self.inputs, state.max_client_batch)?;
        let texts = state.model.prompts.before_texts("prompt_name", self.prompt_name, texts)?;
        Ok((texts, AddSpecialTokens::read(self.add_special_tokens)))
    }
}

/// `/decode`: the token id lists, and whether to leave the special tokens out.
impl Check for DecodeRequest {
    type Valid = (Vec<Vec<u32>>, bool);

    fn check(self, state: &AppState) -> Result<Self::Valid, CallError> {
        let ids = match inputs("ids", self.ids, state.max_client_batch)? {
            EmbedInputs::Tokens(ids) => ids,
            EmbedInputs::Texts(_) | EmbedInputs::Sequences(_) => {
                return Err(CallError::validation(
                    "ids",
                    "must be an array of token ids, or an array of them",
                ));
            }
        };
        Ok((ids, SkipSpecialTokens::read(self.skip_special_tokens)))
    }
}
