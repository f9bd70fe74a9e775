//! Arlo (ICPP '24, `shared/papers/arlo.txt`): polymorphing runtimes. So far its two algorithms:
//! the Runtime Scheduler's allocation (§3.3, Eq. 1–7, solved exactly) and the Request
//! Scheduler's multi-level queue (§3.4, Algorithm 1). The policy that uses them, the runtime-set
//! choice, instance replacement and autoscaling (§4) come next.

pub mod allocate;
pub mod dispatch;

pub use allocate::{Allocation, RuntimeDemand, allocate};
pub use dispatch::{DispatchParams, MultiLevelQueue};
