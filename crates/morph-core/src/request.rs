//! What a policy knows about a request: its id, its shape, when it arrived, for generation how
//! long its output may be and is predicted to be, and optionally its service class.

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
    /// Task, deadline and utility, for policies that weigh them.
    pub service: Option<ServiceClass>,
}

/// What a policy knows of a generation's output before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Generation {
    /// The most tokens it may produce (`max_tokens`).
    pub max_tokens: u32,
    /// The predicted number of output tokens (a proxy model's guess, or the truth for an
    /// oracle); `None` when nothing predicts it.
    pub predicted: Option<u32>,
    /// Of its prompt's tokens, those the decoder's prompt cache held when it arrived: its
    /// prefill still to compute is `input_len − cached`.
    pub cached: u32,
}

/// A task served by a shared model (OTAS: one classification head and prompt set per task), by
/// index into the deployment's task list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct TaskId(pub u16);

/// What a request is worth and by when (OTAS §III-C): its task, the time by which an answer
/// still counts, and the utility it earns then. Integers, so that [`RequestInfo`] stays `Eq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceClass {
    pub task: TaskId,
    /// `None`: no deadline.
    pub deadline: Option<Time>,
    /// Utility earned when answered by the deadline, in millionths.
    pub utility_micros: u32,
}
