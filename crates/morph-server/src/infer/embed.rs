//! The embedding path: tokenize, check lengths, hand each sequence to the driver, await the
//! pooled vectors.

use std::sync::Arc;
use std::time::Instant;

use morph_encoder::TextTokenizer;
use morph_encoder::pooling::l2_normalize;
use morph_encoder::tasks::served::TaskHeads;
use morph_encoder::tokenize::truncate;
use morph_engine::EngineError;

use super::valid::ValidEmbed;
use crate::driver::{CallClass, Driver, Pooled, SeqError};
use crate::error::ApiError;

/// A server's encoder: what embeds and classifies its inputs.
#[derive(Debug)]
pub struct Embedder {
    pub(super) driver: Arc<Driver>,
    tokenizer: Arc<TextTokenizer>,
    /// OTAS's task heads, when the served encoder is the one they read.
    pub(super) heads: Option<Arc<TaskHeads>>,
    /// The longest input any runtime accepts.
    max_input_len: u32,
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
    ) -> Self {
        Self { driver, tokenizer, heads, max_input_len }
    }

    /// The call's vectors, L2-normalised when it asks.
    pub async fn embed(&self, call: ValidEmbed) -> Result<Embedded, ApiError> {
        let normalize = call.normalize;
        let (pooled, tokens) = self.pool(call.texts, call.field, call.truncate, None).await?;
        let mut vectors: Vec<Vec<f32>> = pooled.into_iter().map(|p| p.vector).collect();
        if normalize {
            vectors.iter_mut().for_each(|v| l2_normalize(v));
        }
        Ok(Embedded { vectors, tokens })
    }

    /// The pooled outputs of `texts` (from `field`; cut to the longest runtime when `cut`) with
    /// the plan each ran under, and their token count; `class` is every text's.
    pub(super) async fn pool(
        &self,
        texts: Vec<String>,
        field: &str,
        cut: bool,
        class: Option<CallClass>,
    ) -> Result<(Vec<Pooled>, usize), ApiError> {
        let sequences = self.tokenize(texts, field, cut).await?;
        let tokens = sequences.iter().map(Vec::len).sum();
        for ids in &sequences {
            self.driver.metrics.input_length.observe(ids.len() as f64);
        }
        // The call is admitted whole or refused whole (nothing of it computed and thrown away).
        // Each sequence's claim cancels it if this call is dropped (its client went away) or
        // fails before the sequence is answered.
        let submitted = self.driver.submit_call(sequences, class)?;
        let mut pooled = Vec::with_capacity(submitted.len());
        for (claim, rx) in submitted {
            let result = rx.await;
            claim.answered();
            pooled.push(match result {
                Ok(Ok(p)) => p,
                Ok(Err(SeqError::Dropped(reason))) => return Err(reason.into()),
                Ok(Err(SeqError::Engine(e))) => return Err(ApiError::Engine(e)),
                Err(_) => return Err(ApiError::Engine(EngineError::Stopped)),
            });
        }
        Ok((pooled, tokens))
    }

    async fn tokenize(&self, texts: Vec<String>, field: &str, cut: bool) -> Result<Vec<Vec<u32>>, ApiError> {
        let started = Instant::now();
        let tokenizer = self.tokenizer.clone();
        let max_len = self.max_input_len as usize;
        let encoded = tokio::task::spawn_blocking(move || {
            texts.iter().map(|t| tokenizer.encode(t)).collect::<Result<Vec<_>, _>>()
        })
        .await
        .map_err(|e| ApiError::Engine(EngineError::Tokenize(e.to_string())))?
        .map_err(ApiError::Engine)?;
        self.driver.metrics.tokenization_seconds.observe(started.elapsed().as_secs_f64());
        let n = encoded.len();
        encoded
            .into_iter()
            .enumerate()
            .map(|(i, mut ids)| {
                if ids.len() > max_len {
                    if !cut {
                        let field = field_of(field, i, n);
                        return Err(ApiError::TooLong { field, len: ids.len(), max_len: max_len as u32 });
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
