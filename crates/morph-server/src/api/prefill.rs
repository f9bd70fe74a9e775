//! A completion on a decoder cut into prefill stages (QUART's functions: one forward pass per
//! request): the prompt runs through the stages as one sequence of the encoder path, the last
//! stage's next-token logits are sampled once, and the call gets that one token, in the same
//! formats (and stream) as a whole decoder's completion.

use std::sync::Arc;

use morph_decoder::{FinishReason, GenEvent, GgufTokenizer, Llama, Sampler};
use morph_engine::EngineError;
use serde_json::{Map, Value};
use tokio::sync::mpsc::unbounded_channel;

use super::AppState;
use super::generate::{Request, Started};
use crate::driver::SeqError;
use crate::error::ApiError;

/// Runs `request`'s prompt through the stages and answers its one next token.
pub(super) async fn next_token(
    state: &AppState,
    body: &Map<String, Value>,
    mut request: Request,
    generator: &Arc<(Llama, GgufTokenizer)>,
) -> Result<Started, ApiError> {
    if body.contains_key("max_tokens") && request.max_tokens != 1 {
        let message = "this server runs the decoder's prefill in stages: it answers one token (max_tokens 1)";
        return Err(ApiError::validation("max_tokens", message));
    }
    request.max_tokens = 1;
    let prompt_tokens = request.prompt.len();
    let (claim, rx) = state.driver.submit(request.prompt.clone());
    let logits = match rx.await {
        Ok(Ok(pooled)) => pooled.vector,
        Ok(Err(SeqError::Dropped(reason))) => return Err(ApiError::generation_dropped(reason)),
        Ok(Err(SeqError::Engine(e))) => return Err(ApiError::Engine(e)),
        Err(_) => return Err(ApiError::Engine(EngineError::Stopped)),
    };
    let token = Sampler::new(request.sampling).sample(&logits);
    let (events, rx) = unbounded_channel();
    let (first, reason, completion_tokens) = match token == generator.1.eos {
        true => (None, FinishReason::Stop, 0),
        false => {
            let text = generator.1.decode(&[token]).map_err(ApiError::Engine)?;
            (Some(GenEvent::Token { id: token, text }), FinishReason::Length, 1)
        }
    };
    let done = GenEvent::Done { reason, prompt_tokens, cached_tokens: 0, completion_tokens };
    let first = match first {
        Some(first) => {
            let _ = events.send(done);
            first
        }
        None => done,
    };
    Ok((request, claim, rx, first))
}
