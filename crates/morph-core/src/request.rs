//! What a policy knows about a request: its id, its shape and when it arrived.

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
}
