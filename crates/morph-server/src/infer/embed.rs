//! The embedding path: tokenize, check lengths, hand each sequence to the driver, await the
//! pooled vectors.

use std::sync::Arc;
use std::time::Instant;

use morph_encoder::pooling::l2_normalize;
use morph_encoder::tasks::served::TaskHeads;
use morph_encoder::tokenize::truncate;
use morph_encoder::{TextTokenizer, TokenSpan};
use morph_engine::EngineError;

use super::valid::{EmbedInputs, ValidEmbed};
use crate::driver::{CallClass, Driver, Pooled, SeqError};
use crate::error::CallError;

/// A server's encoder: what embeds and classifies its inputs.
#[derive(Debug)]
pub struct Embedder {
    pub(super) driver: Arc<Driver>,
    tokenizer: Arc<TextTokenizer>,
    /// OTAS's task heads, when the served encoder is the one they read.
    pub(super) heads: Option<Arc<TaskHeads>>,
    /// The longest input any runtime accepts.
    max_input_len: u32,
    /// Most of one call's sequences handed to the policy at once: a larger call goes in waves,
    /// each once the last is answered, so that it fits the policy's queue.
    wave: usize,
}

/// Vectors for one call, and its token count (for `usage`).
#[derive(Debug)]
pub struct Embedded {
    pub vectors: Vec<Vec<f32>>,
    pub tokens: usize,
}

impl Embedder {
    pub fn new(
        driver: Arc<Driver>,
        tokenizer: Arc<TextTokenizer>,
        heads: Option<Arc<TaskHeads>>,
        max_input_len: u32,
        wave: usize,
    ) -> Self {
        Self { driver, tokenizer, heads, max_input_len, wave: wave.max(1) }
    }

    /// The call's vectors, L2-normalised when it asks.
    pub async fn embed(&self, call: ValidEmbed) -> Result<Embedded, CallError> {
        let normalize = call.normalize;
        let (pooled, tokens) = self.pool(call.inputs, call.field, call.truncate, None).await?;
        let mut vectors: Vec<Vec<f32>> = pooled.into_iter().map(|p| p.vector).collect();
        if normalize {
            vectors.iter_mut().for_each(|v| l2_normalize(v));
        }
        Ok(Embedded { vectors, tokens })
    }

    /// The pooled outputs of `inputs` (from `field`; cut to the longest runtime when `cut`)
    /// with the plan each ran under, and their token count; `class` is every input's.
    pub(super) async fn pool(
        &self,
        inputs: EmbedInputs,
        field: &str,
        cut: bool,
        class: Option<CallClass>,
    ) -> Result<(Vec<Pooled>, usize), CallError> {
        let sequences = match inputs {
            EmbedInputs::Texts(texts) => self.tokenize(texts).await?,
            EmbedInputs::Tokens(ids) => self.known_ids(ids, field)?,
        };
        let sequences = self.fit(sequences, field, cut)?;
        let tokens = sequences.iter().map(Vec::len).sum();
        for ids in &sequences {
            self.driver.metrics.input_tokens(ids.len());
        }
        let mut pooled = Vec::with_capacity(sequences.len());
        let mut sequences = sequences.into_iter().peekable();
        while sequences.peek().is_some() {
            let wave: Vec<Vec<u32>> = sequences.by_ref().take(self.wave).collect();
            pooled.extend(self.run_wave(wave, class).await?);
        }
        Ok((pooled, tokens))
    }

    /// One wave of a call's sequences, admitted whole or refused whole (nothing of it computed
    /// and thrown away). Each sequence's claim cancels it if this call is dropped (its client
    /// went away) or fails before the sequence is answered.
    async fn run_wave(
        &self,
        sequences: Vec<Vec<u32>>,
        class: Option<CallClass>,
    ) -> Result<Vec<Pooled>, CallError> {
        let submitted = self.driver.submit_call(sequences, class)?;
        let mut pooled = Vec::with_capacity(submitted.len());
        for (claim, rx) in submitted {
            let result = rx.await;
            claim.answered();
            pooled.push(match result {
                Ok(Ok(p)) => p,
                Ok(Err(SeqError::Dropped(reason))) => return Err(reason.into()),
                Ok(Err(SeqError::Engine(e))) => return Err(CallError::Engine(e)),
                Err(_) => return Err(CallError::Engine(EngineError::Stopped)),
            });
        }
        Ok(pooled)
    }

    /// Each text's tokens, as `/tokenize` answers them.
    pub async fn spans(
        &self,
        texts: Vec<String>,
        add_special: bool,
    ) -> Result<Vec<Vec<TokenSpan>>, CallError> {
        let tokenizer = self.tokenizer.clone();
        tokio::task::spawn_blocking(move || {
            texts.iter().map(|t| tokenizer.spans(t, add_special)).collect::<Result<Vec<_>, _>>()
        })
        .await
        .map_err(|e| CallError::Engine(EngineError::Tokenize(e.to_string())))?
        .map_err(CallError::Engine)
    }

    /// Each id list's text (ids checked against the vocabulary first).
    pub fn decode(&self, ids: Vec<Vec<u32>>, skip_special: bool) -> Result<Vec<String>, CallError> {
        let ids = self.known_ids(ids, "ids")?;
        ids.iter().map(|ids| self.tokenizer.decode(ids, skip_special).map_err(CallError::Engine)).collect()
    }

    /// Token ids sent by the caller, each checked against the vocabulary.
    fn known_ids(&self, ids: Vec<Vec<u32>>, field: &str) -> Result<Vec<Vec<u32>>, CallError> {
        let vocab = self.tokenizer.vocab_size();
        let n = ids.len();
        for (i, seq) in ids.iter().enumerate() {
            if let Some(bad) = seq.iter().find(|&&id| id as usize >= vocab) {
                let message = format!("token id {bad} is not in the model's vocabulary of {vocab}");
                return Err(CallError::validation(field_of(field, i, n), message));
            }
        }
        Ok(ids)
    }

    async fn tokenize(&self, texts: Vec<String>) -> Result<Vec<Vec<u32>>, CallError> {
        let started = Instant::now();
        let tokenizer = self.tokenizer.clone();
        let encoded = tokio::task::spawn_blocking(move || {
            texts.iter().map(|t| tokenizer.encode(t)).collect::<Result<Vec<_>, _>>()
        })
        .await
        .map_err(|e| CallError::Engine(EngineError::Tokenize(e.to_string())))?
        .map_err(CallError::Engine)?;
        self.driver.metrics.tokenization(started.elapsed().as_secs_f64());
        Ok(encoded)
    }

    /// Sequences longer than the longest runtime are cut when `cut`, else refused.
    fn fit(&self, encoded: Vec<Vec<u32>>, field: &str, cut: bool) -> Result<Vec<Vec<u32>>, CallError> {
        let max_len = self.max_input_len as usize;
        let n = encoded.len();
        encoded
            .into_iter()
            .enumerate()
            .map(|(i, mut ids)| {
                if ids.len() > max_len {
                    if !cut {
                        let field = field_of(field, i, n);
                        return Err(CallError::TooLong { field, len: ids.len(), max_len: max_len as u32 });
                    }
                    truncate(&mut ids, max_len);
                }
                Ok(ids)
            })
            .collect()
    }
}

/// Per-input field name for error messages: `input` for a single string, `input[i]` otherwise.
fn field_of(field: &str, i: usize, n: usize) -> String {
    if n == 1 { field.to_string() } else { format!("{field}[{i}]") }
}
