//! The embedding path: tokenize, check lengths, hand each sequence to the driver, await the
//! pooled vectors.

use std::sync::Arc;
use std::time::Instant;

use futures_util::future::try_join_all;
use morph_encoder::pooling::l2_normalize;
use morph_encoder::tasks::served::TaskHeads;
use morph_encoder::tokenize::{truncate, truncate_start};
use morph_encoder::{SequenceClassifier, TextTokenizer, TokenSpan};
use morph_engine::EngineError;

use super::valid::{EmbedInputs, Sequence, Truncation, ValidEmbed};
use crate::driver::{CallClass, Driver, Pooled, SeqError};
use crate::error::CallError;

/// A server's encoder: what embeds and classifies its inputs.
#[derive(Debug)]
pub struct Embedder {
    pub(super) driver: Arc<Driver>,
    tokenizer: Arc<TextTokenizer>,
    /// OTAS's task heads, when the served encoder is the one they read.
    pub(super) heads: Option<Arc<TaskHeads>>,
    /// A sequence-classification checkpoint's own head: the server classifies or reranks, and
    /// does not embed.
    pub(super) classifier: Option<Arc<SequenceClassifier>>,
    /// The longest input served: the longest runtime's, or the model's `max_seq_length` where
    /// shorter.
    max_input_len: u32,
    /// Most of one call's sequences handed to the policy at once: a larger call goes in waves,
    /// each once the last is answered, so that it fits the policy's queue.
    wave: usize,
}

/// What the served encoder answers: TEI's three kinds of model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelKind {
    Embedding,
    /// A sequence classifier of several labels (`/predict`).
    Classifier,
    /// A cross-encoder of one relevance output (`/rerank`, `/v1/rerank`, and `/predict`).
    Reranker,
}

impl ModelKind {
    /// The kind's name (`/info` of a several-model server).
    pub fn label(self) -> &'static str {
        match self {
            ModelKind::Embedding => "embedding",
            ModelKind::Classifier => "classifier",
            ModelKind::Reranker => "reranker",
        }
    }

    /// What a server of this kind serves instead of embeddings, if it does not embed.
    pub fn not_embedding(self) -> Option<&'static str> {
        match self {
            ModelKind::Embedding => None,
            ModelKind::Classifier => Some("sequence classification: use /predict"),
            ModelKind::Reranker => Some("reranking: use /rerank, /v1/rerank or /predict"),
        }
    }
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
        classifier: Option<Arc<SequenceClassifier>>,
        max_input_len: u32,
        wave: usize,
    ) -> Self {
        Self { driver, tokenizer, heads, classifier, max_input_len, wave: wave.max(1) }
    }

    /// How many tokens the model's tokenizer has (token ids sent run from 0 to one less).
    pub fn vocab_size(&self) -> usize {
        self.tokenizer.vocab_size()
    }

    /// What the served model's kind is, as TEI dispatches `POST /` by it.
    pub fn kind(&self) -> ModelKind {
        match &self.classifier {
            None => ModelKind::Embedding,
            Some(head) if head.is_reranker() => ModelKind::Reranker,
            Some(_) => ModelKind::Classifier,
        }
    }

    /// The call's vectors, L2-normalised when it asks; a classifier's server refuses to embed.
    pub async fn embed(&self, call: ValidEmbed) -> Result<Embedded, CallError> {
        if let Some(served) = self.kind().not_embedding() {
            return Err(CallError::WrongEndpoint { served });
        }
        let normalize = call.normalize;
        let (pooled, tokens) = self.pool(call.inputs, call.field, call.truncate, None).await?;
        let mut vectors: Vec<Vec<f32>> = pooled.into_iter().map(|p| p.vector).collect();
        if normalize {
            vectors.iter_mut().for_each(|v| l2_normalize(v));
        }
        Ok(Embedded { vectors, tokens })
    }

    /// The pooled outputs of `inputs` (from `field`; longer than the longest input served cut or
    /// refused as `cut` says) with the plan each ran under, and their token count; `class` is
    /// every input's.
    pub(super) async fn pool(
        &self,
        inputs: EmbedInputs,
        field: &str,
        cut: Truncation,
        class: Option<CallClass>,
    ) -> Result<(Vec<Pooled>, usize), CallError> {
        // Refused before tokenizing, a call past saturation costs the engines' cores little.
        if let Some(reason) = self.driver.refuses_any() {
            return Err(reason.into());
        }
        let sequences = match inputs {
            EmbedInputs::Texts(texts) => self.tokenize(texts).await?,
            EmbedInputs::Tokens(ids) => self.known_ids(ids, field)?,
            EmbedInputs::Sequences(sequences) => self.tokenize_sequences(sequences).await?,
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
    /// and thrown away). The call fails as soon as any of its sequences fails (given up, an
    /// engine error): each sequence's claim cancels it if this call is dropped (its client went
    /// away) or fails before the sequence is answered, so its siblings still queued leave at once.
    async fn run_wave(
        &self,
        sequences: Vec<Vec<u32>>,
        class: Option<CallClass>,
    ) -> Result<Vec<Pooled>, CallError> {
        let submitted = self.driver.submit_call(sequences, class)?;
        try_join_all(submitted.into_iter().map(|(claim, rx)| async move {
            let result = rx.await;
            claim.answered();
            match result {
                Ok(Ok(p)) => Ok(p),
                Ok(Err(SeqError::Dropped(reason))) => Err(reason.into()),
                Ok(Err(SeqError::Engine(e))) => Err(CallError::Engine(e)),
                Err(_) => Err(CallError::Engine(EngineError::Stopped)),
            }
        }))
        .await
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
        let vocab = self.vocab_size();
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
        let tokenizer = self.tokenizer.clone();
        self.timed_tokenize(move || texts.iter().map(|t| tokenizer.encode(t)).collect()).await
    }

    /// Texts and pairs as the classifier's encoder takes them ([`SequenceClassifier::encode`]).
    async fn tokenize_sequences(&self, sequences: Vec<Sequence>) -> Result<Vec<Vec<u32>>, CallError> {
        let Some(head) = self.classifier.clone() else {
            return Err(CallError::validation(
                "inputs",
                "pairs of texts are for a sequence-classification model",
            ));
        };
        let tokenizer = self.tokenizer.clone();
        self.timed_tokenize(move || {
            sequences.iter().map(|s| head.encode(&tokenizer, &s.text, s.pair.as_deref())).collect()
        })
        .await
    }

    /// Runs `encode` off the async threads, timed into the tokenization metric.
    async fn timed_tokenize(
        &self,
        encode: impl FnOnce() -> Result<Vec<Vec<u32>>, EngineError> + Send + 'static,
    ) -> Result<Vec<Vec<u32>>, CallError> {
        let started = Instant::now();
        let encoded = tokio::task::spawn_blocking(encode)
            .await
            .map_err(|e| CallError::Engine(EngineError::Tokenize(e.to_string())))?
            .map_err(CallError::Engine)?;
        self.driver.metrics.tokenization(started.elapsed().as_secs_f64());
        Ok(encoded)
    }

    /// Sequences longer than the longest input served (`max_input_len`) are cut or refused, as
    /// `cut` says.
    fn fit(&self, encoded: Vec<Vec<u32>>, field: &str, cut: Truncation) -> Result<Vec<Vec<u32>>, CallError> {
        let max_len = self.max_input_len as usize;
        let n = encoded.len();
        encoded
            .into_iter()
            .enumerate()
            .map(|(i, mut ids)| {
                if ids.len() > max_len {
                    match cut {
                        Truncation::Refuse => {
                            let field = field_of(field, i, n);
                            return Err(CallError::TooLong {
                                field,
                                len: ids.len(),
                                max_len: max_len as u32,
                            });
                        }
                        Truncation::End => truncate(&mut ids, max_len),
                        Truncation::Start => truncate_start(&mut ids, max_len),
                    }
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
