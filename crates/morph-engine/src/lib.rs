//! Morph's engine contract. An [`Engine`] is one instance of a runtime: it runs a batch of token
//! sequences (or, for a later pipeline stage, the hidden states the previous stage handed on)
//! at the runtime's padded shape under a token plan, and returns one vector per sequence.
//! Engines that compute are in `morph-encoder` (ONNX Runtime graphs Morph writes, candle) and
//! `morph-decoder` (prefill stages of a decoder); [`EmulatedRuntime`] takes its time from a
//! latency profile instead. Any of them runs on its own OS thread behind an [`EngineThread`],
//! or in a `morph worker` process (the `morph-worker` crate's transport).

pub mod actor;
mod at_once;
pub mod cores;
pub mod emulated;
pub mod host;
mod mapped;
mod on_core;
mod start;
pub mod thread;
pub mod timing;

pub use at_once::at_once;
pub use cores::{CoreBudget, CoreShare, Cores, ModelCores};
pub use emulated::EmulatedRuntime;
pub use mapped::map_prepared;
pub use start::StartTimes;
pub use thread::{EngineHandle, EngineThread, Ran};

use morph_core::{RuntimeSpec, TaskId, TokenPlan};

/// Engine failures. `Clone` so one failure can be reported to every request of a batch.
#[derive(Debug, Clone, PartialEq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum EngineError {
    #[error("model could not be loaded: {0}")]
    Load(String),
    #[error("tokenization failed: {0}")]
    Tokenize(String),
    #[error("batch does not fit runtime {runtime}: {detail}")]
    Shape { runtime: RuntimeSpec, detail: String },
    #[error("inference failed: {0}")]
    Inference(String),
    #[error("engine worker has stopped")]
    Stopped,
    /// A worker process crashed, closed its connection or stopped answering.
    #[error("engine worker lost: {0}")]
    Lost(String),
    #[error("not supported by this instance: {0}")]
    Unsupported(String),
    /// The input holds what the model cannot represent (a character its vocabulary lacks).
    #[error("{0}")]
    Unrepresentable(String),
}

#[cfg(feature = "candle")]
impl From<candle_core::Error> for EngineError {
    fn from(e: candle_core::Error) -> Self {
        EngineError::Inference(e.to_string())
    }
}

/// A batch's rows: token ids (a whole model, or a pipeline's first stage), token ids with each
/// row's task (a prompt plan gathers each row's prompts by it), or the hidden states a previous
/// stage handed on (per row `tokens × hidden` floats, row-major).
#[derive(Debug, Clone, Copy)]
pub enum BatchInput<'a> {
    Tokens(&'a [Vec<u32>]),
    Tasked(&'a [Vec<u32>], &'a [TaskId]),
    Hidden(&'a [Vec<f32>]),
}

impl<'a> BatchInput<'a> {
    /// The token ids, tasked or not.
    pub fn tokens(self) -> Option<&'a [Vec<u32>]> {
        match self {
            BatchInput::Tokens(rows) | BatchInput::Tasked(rows, _) => Some(rows),
            BatchInput::Hidden(_) => None,
        }
    }

    /// Each row's length in tokens (a hidden state row holds `dim` floats a token).
    pub fn lens(self, dim: usize) -> Vec<usize> {
        match self {
            BatchInput::Hidden(rows) => rows.iter().map(|r| r.len() / dim.max(1)).collect(),
            tokens => tokens.tokens().unwrap_or_default().iter().map(Vec::len).collect(),
        }
    }
}

/// A batch's rows, owned (to send to an engine's thread or a worker process).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Rows {
    Tokens(Vec<Vec<u32>>),
    Tasked(Vec<Vec<u32>>, Vec<TaskId>),
    Hidden(Vec<Vec<f32>>),
}

impl Rows {
    pub fn as_input(&self) -> BatchInput<'_> {
        match self {
            Rows::Tokens(rows) => BatchInput::Tokens(rows),
            Rows::Tasked(rows, tasks) => BatchInput::Tasked(rows, tasks),
            Rows::Hidden(rows) => BatchInput::Hidden(rows),
        }
    }
}

impl From<BatchInput<'_>> for Rows {
    fn from(input: BatchInput<'_>) -> Self {
        match input {
            BatchInput::Tokens(rows) => Rows::Tokens(rows.to_vec()),
            BatchInput::Tasked(rows, tasks) => Rows::Tasked(rows.to_vec(), tasks.to_vec()),
            BatchInput::Hidden(rows) => Rows::Hidden(rows.to_vec()),
        }
    }
}

/// One runtime instance. Synchronous; it runs on a dedicated thread.
pub trait Engine: Send {
    fn runtime(&self) -> RuntimeSpec;

    /// Output vector size (the hidden size).
    fn dim(&self) -> usize;

    /// Runs `input` (each row at most `runtime().max_len` tokens, at most `max_batch` rows) as
    /// one batch under token plan `plan`; returns one vector per row, in order: its pooled,
    /// unnormalised vector, or, on a stage that hands on to a next one, its hidden states.
    fn run(&mut self, input: BatchInput<'_>, plan: TokenPlan) -> Result<Vec<Vec<f32>>, EngineError>;

    /// Whether a batch under `plan` computes only its rows' real tokens (the padding removed),
    /// so that it costs what its rows at their mean length cost ([`RuntimeSpec::priced_shape`]);
    /// otherwise every row costs what the longest does.
    fn packs(&self, _plan: TokenPlan) -> bool {
        false
    }

    /// The pooled vectors of a batch of token ids on the plain model.
    fn embed(&mut self, inputs: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, EngineError> {
        self.run(BatchInput::Tokens(inputs), TokenPlan::Plain)
    }
}

/// The token ids of a batch a whole, plain model runs; an error naming what this instance
/// lacks otherwise.
pub fn plain_tokens(input: BatchInput<'_>, plan: TokenPlan) -> Result<&[Vec<u32>], EngineError> {
    match input.tokens() {
        Some(rows) if plan == TokenPlan::Plain => Ok(rows),
        Some(_) => Err(EngineError::Unsupported(format!("token plan {plan}"))),
        None => Err(EngineError::Unsupported("hidden states from a previous stage".into())),
    }
}

/// Checks a batch of token ids against the runtime's shape contract; its longest sequence.
pub fn check_batch(runtime: RuntimeSpec, inputs: &[Vec<u32>]) -> Result<u32, EngineError> {
    let lens: Vec<usize> = inputs.iter().map(Vec::len).collect();
    check_lengths(runtime, &lens)
}

/// Checks a batch of rows of these lengths against the runtime's shape contract; the longest.
pub fn check_lengths(runtime: RuntimeSpec, lens: &[usize]) -> Result<u32, EngineError> {
    let shape_err = |detail: String| EngineError::Shape { runtime, detail };
    if lens.is_empty() || lens.len() > runtime.max_batch as usize {
        return Err(shape_err(format!("{} rows (1..={} allowed)", lens.len(), runtime.max_batch)));
    }
    let longest = lens.iter().copied().max().unwrap_or(0);
    if longest == 0 || !runtime.fits(u32::try_from(longest).unwrap_or(u32::MAX)) {
        return Err(shape_err(format!(
            "longest sequence {longest} tokens (1..={})",
            runtime.longest_taken()
        )));
    }
    Ok(longest as u32)
}
