//! Arlo (ICPP '24, `shared/papers/arlo.txt`): polymorphing runtimes. So far: the Request
//! Scheduler's multi-level queue (§3.4, Algorithm 1). The Runtime Scheduler (§3.3, Eq. 1–7),
//! instance replacement and autoscaling (§4) come with the Arlo policy itself.

pub mod dispatch;

pub use dispatch::{DispatchParams, MultiLevelQueue};
