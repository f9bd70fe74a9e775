//! How long an engine took to start, step by step (reported by a worker process, logged by
//! the server, read by the placement of replicas).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How long starting an instance took, step by step: loading ONNX Runtime's library into the
/// process, reading (weights from disk, or a prepared artefact from host memory), writing the
/// graphs, and setting up the sessions.
#[derive(Debug, Default, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StartTimes {
    pub library: Duration,
    pub read: Duration,
    pub build: Duration,
    pub session: Duration,
}
