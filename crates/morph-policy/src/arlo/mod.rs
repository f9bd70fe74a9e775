//! Arlo (ICPP '24, `shared/papers/arlo.txt`): polymorphing runtimes. Its parts: the runtime set
//! (§3.3), the Runtime Scheduler's allocation (§3.3, Eq. 1–7, solved exactly) and its periodic
//! step, instance replacement (§4) and the Request Scheduler's multi-level queue (§3.4,
//! Algorithm 1). The policy that runs them is [`crate::fleet::FleetPolicy`] (preset `arlo`),
//! which also runs the baselines.

pub mod allocate;
pub mod dispatch;
pub mod reallocate;
pub mod replace;
pub mod runtime_set;
pub mod service;

pub use allocate::{Allocation, Floors, RuntimeDemand, allocate};
pub use dispatch::{DispatchParams, DispatchRule, MultiLevelQueue};
pub use service::ServiceModel;
