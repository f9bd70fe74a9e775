//! A completion on a decoder cut into prefill stages (QUART's functions: one forward pass per
//! request): the prompt runs through the stages as one sequence of the encoder path, the last
//! stage's next-token logits are sampled once, and the call gets that one token, in the same
//! formats (and stream) as a whole decoder's completion.

use morph_decoder::{Decoding, FinishReason, GenEvent, Scanned, StopScan, token_logprob};
use morph_engine::EngineError;
use tokio::sync::mpsc::unbounded_channel;

use super::generate::{Generator, StartedGeneration};
use super::valid::ValidGeneration;
use crate::driver::SeqError;
use crate::error::CallError;

impl Generator {
    /// A call to a prefill-stage server may ask for its one token only, not its prompt back.
    pub(super) fn one_token(call: &ValidGeneration) -> Result<(), CallError> {
        let staged = "this server runs the decoder's prefill in stages: it answers one token";
        if call.echo {
            return Err(CallError::validation("echo", format!("{staged}, without its prompt")));
        }
        match call.max_tokens_given && call.max_tokens != 1 {
            true => Err(CallError::validation("max_tokens", format!("{staged} (max_tokens 1)"))),
            false => Ok(()),
        }
    }

    /// Runs `prompt` through the stages and answers its one next token.
    pub(super) async fn next_token(
        &self,
        decoding: Decoding,
        prompt: Vec<u32>,
    ) -> Result<StartedGeneration, CallError> {
        let prompt_tokens = prompt.len();
        let (claim, rx) = self.driver.submit(prompt);
        let logits = match rx.await {
            Ok(Ok(pooled)) => pooled.vector,
            Ok(Err(SeqError::Dropped(reason))) => return Err(CallError::generation_dropped(reason)),
            Ok(Err(SeqError::Engine(e))) => return Err(CallError::Engine(e)),
            Err(_) => return Err(CallError::Engine(EngineError::Stopped)),
        };
        let tokenizer = &self.model.tokenizer;
        let token = decoding.sampler().sample(&logits);
        let logprob = decoding.logprobs.map(|top| token_logprob(&logits, token, usize::from(top)));
        let (events, rx) = unbounded_channel();
        let mut stop = StopScan::new(decoding.stop);
        let (first, reason, completion_tokens) = match tokenizer.is_end(token) {
            true => (None, FinishReason::Stop, 0),
            false => {
                let text = tokenizer.decode(&[token]).map_err(CallError::Engine)?;
                let (text, reason) = match stop.push(text) {
                    Scanned::Text(text) => (text, FinishReason::Length),
                    Scanned::Stopped(text) => (text, FinishReason::Stop),
                };
                (Some(GenEvent::Token { id: token, text, logprob }), reason, 1)
            }
        };
        let tail = stop.flush();
        let done = GenEvent::Done { reason, tail, prompt_tokens, cached_tokens: 0, completion_tokens };
        let first = match first {
            Some(first) => {
                let _ = events.send(done);
                first
            }
            None => done,
        };
        Ok(StartedGeneration { claim, events: rx, first, truth: None, echo: None })
    }
}
