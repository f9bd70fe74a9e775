//! The embedding path shared by `/v1/embeddings` and `/embed`: tokenize, check lengths, hand each
//! sequence to the driver, await the vectors.

use std::time::Instant;

use morph_encoder::pooling::l2_normalize;
use morph_encoder::tokenize::truncate;
use morph_engine::EngineError;

use morph_core::{Nanos, TaskId};

use super::AppState;
use crate::driver::{Pooled, SeqError};
use crate::error::ApiError;

/// Vectors for one call, and its token count (for `usage`).
pub(super) struct Embedded {
    pub vectors: Vec<Vec<f32>>,
    pub tokens: usize,
}

/// Per-input field name for error messages: `input` for a single string, `input[i]` otherwise.
fn field_of(field: &str, i: usize, n: usize) -> String {
    if n == 1 { field.to_string() } else { format!("{field}[{i}]") }
}

async fn tokenize(
    state: &AppState,
    texts: Vec<String>,
    field: &str,
    cut: bool,
) -> Result<Vec<Vec<u32>>, ApiError> {
    let started = Instant::now();
    let tokenizer = state.tokenizer.clone().ok_or(ApiError::WrongEndpoint {
        served: "text generation: use /v1/completions or /v1/chat/completions",
    })?;
    let max_len = state.model.max_input_len as usize;
    let encoded = tokio::task::spawn_blocking(move || {
        texts.iter().map(|t| tokenizer.encode(t)).collect::<Result<Vec<_>, _>>()
    })
    .await
    .map_err(|e| ApiError::Engine(EngineError::Tokenize(e.to_string())))?
    .map_err(ApiError::Engine)?;
    state.driver.metrics.tokenization_seconds.observe(started.elapsed().as_secs_f64());
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

/// Embeds `texts` (already validated non-empty); vectors are L2-normalised when `normalize`.
pub(super) async fn embed_texts(
    state: &AppState,
    texts: Vec<String>,
    field: &str,
    cut: bool,
    normalize: bool,
) -> Result<Embedded, ApiError> {
    let (pooled, tokens) = pool_texts(state, texts, field, cut, None).await?;
    let mut vectors: Vec<Vec<f32>> = pooled.into_iter().map(|p| p.vector).collect();
    if normalize {
        vectors.iter_mut().for_each(|v| l2_normalize(v));
    }
    Ok(Embedded { vectors, tokens })
}

/// The pooled outputs of `texts` (already validated non-empty) with the plan each ran under,
/// and their token count; `service` (task, SLO, utility) is every text's.
pub(super) async fn pool_texts(
    state: &AppState,
    texts: Vec<String>,
    field: &str,
    cut: bool,
    service: Option<(TaskId, Option<Nanos>, f64)>,
) -> Result<(Vec<Pooled>, usize), ApiError> {
    let sequences = tokenize(state, texts, field, cut).await?;
    let tokens = sequences.iter().map(Vec::len).sum();
    let metrics = &state.driver.metrics;
    // Each sequence's claim cancels it if this call is dropped (its client went away) or
    // fails before the sequence is answered.
    // The call is admitted whole or refused whole (nothing of it computed and thrown away).
    for ids in &sequences {
        metrics.input_length.observe(ids.len() as f64);
    }
    let submitted = state.driver.submit_call(sequences, service)?;
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

/// Runs a call's `work`, counting it and its outcome in the metrics.
pub(super) async fn recorded<T>(
    state: &AppState,
    work: impl std::future::Future<Output = Result<T, ApiError>>,
) -> Result<T, ApiError> {
    let started = Instant::now();
    let result = work.await;
    record(state, started, &result);
    result
}

/// Counts a call and its outcome in the metrics.
pub(super) fn record<T>(state: &AppState, started: Instant, result: &Result<T, ApiError>) {
    let metrics = &state.driver.metrics;
    metrics.requests.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    match result {
        Ok(_) => metrics.request_seconds.observe(started.elapsed().as_secs_f64()),
        Err(e) => metrics.fail(e.kind()),
    }
}
