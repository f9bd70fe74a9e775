//! What a policy knows about a request: its id, its shape, when it arrived and, for
//! generation, how long its output may be and is predicted to be.

use serde::{Deserialize, Serialize};

use crate::time::Time;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RequestId(pub u64);

/// One sequence to run. An HTTP call with an array input becomes one request per element,
/// so a policy batches sequences, never whole calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestInfo {
    pub id: RequestId,
    /// Input length in tokens, special tokens included.
    pub input_len: u32,
    pub arrival: Time,
    /// `None` for an encoder request.
    pub generation: Option<Generation>,
}

/// What a policy knows of a generation's output before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Generation {
    /// The most tokens it may produce (`max_tokens`).
    pub max_tokens: u32,
    /// The predicted number of output tokens (a proxy model's guess, or the truth for an
    /// oracle); `None` when nothing predicts it.
    pub predicted: Option<u32>,
}
