//! Morph's engines. An [`Engine`] is one instance of a runtime: it runs a batch of token
//! sequences at the runtime's padded shape and returns one pooled vector per sequence.
//! [`CandleRuntime`] computes with candle on the CPU; [`OrtRuntime`] runs a graph Morph writes
//! itself ([`onnx`]) on ONNX Runtime; [`EmulatedRuntime`] takes its time from a latency profile
//! instead. Either runs on its own OS thread behind an [`EngineWorker`].

pub mod bert;
pub mod candle_runtime;
pub mod checkpoint;
pub mod decoder;
pub mod emulated;
pub mod fetch;
pub mod kernels;
pub mod measure;
pub mod onnx;
pub mod ort_library;
pub mod ort_runtime;
pub mod pooling;
pub mod predictor;
pub mod tokenize;
pub mod tuning;
pub mod worker;

pub use candle_runtime::{CandleRuntime, Encoder};
pub use emulated::EmulatedRuntime;
pub use fetch::{ModelFiles, ModelSource};
pub use ort_runtime::{OrtEncoder, OrtRuntime};
pub use pooling::Pooling;
pub use tokenize::TextTokenizer;
pub use worker::{EngineHandle, EngineWorker};

use morph_core::RuntimeSpec;

/// Engine failures. `Clone` so one failure can be reported to every request of a batch.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
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
}

impl From<candle_core::Error> for EngineError {
    fn from(e: candle_core::Error) -> Self {
        EngineError::Inference(e.to_string())
    }
}

/// One runtime instance. Synchronous; it runs on a dedicated thread.
pub trait Engine: Send {
    fn runtime(&self) -> RuntimeSpec;

    /// Output vector size.
    fn dim(&self) -> usize;

    /// Runs `inputs` (token ids, each at most `runtime().max_len`, at most `max_batch` of them)
    /// as one batch; returns one pooled, unnormalised vector per input, in order.
    fn embed(&mut self, inputs: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, EngineError>;
}

/// Checks a batch against the runtime's shape contract and returns its longest sequence.
pub fn check_batch(runtime: RuntimeSpec, inputs: &[Vec<u32>]) -> Result<u32, EngineError> {
    let shape_err = |detail: String| EngineError::Shape { runtime, detail };
    if inputs.is_empty() || inputs.len() > runtime.max_batch as usize {
        return Err(shape_err(format!("{} rows (1..={} allowed)", inputs.len(), runtime.max_batch)));
    }
    let longest = inputs.iter().map(Vec::len).max().unwrap_or(0);
    if longest == 0 || longest > runtime.max_len as usize {
        return Err(shape_err(format!("longest sequence {longest} tokens (1..={})", runtime.max_len)));
    }
    Ok(longest as u32)
}
