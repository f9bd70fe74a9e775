//! Arlo (ICPP '24, `shared/papers/arlo.txt`): polymorphing runtimes. Its parts: the runtime set
//! (§3.3), the Runtime Scheduler's allocation (§3.3, Eq. 1–7, solved exactly) and its periodic
//! step, instance replacement (§4) and the Request Scheduler's multi-level queue (§3.4,
//! Algorithm 1). [`ArloPolicy`] runs them over fixed-shape instances with per-instance queues
//! (preset `arlo`), and runs the paper's baselines as presets too (`st`, `dt`, `infaas`).

pub mod allocate;
pub mod capacity;
pub mod config;
pub mod dispatch;
#[cfg(test)]
mod fallback_tests;
#[cfg(test)]
mod handover_tests;
mod instances;
pub mod policy;
pub mod premise;
pub mod reallocate;
pub mod replace;
pub mod runtime_set;
pub mod scaling;
pub mod service;
mod waiting;

pub use allocate::{Allocation, Floors, RuntimeDemand, allocate};
pub use config::{ArloConfig, RuntimeSet};
pub use dispatch::{DispatchParams, DispatchRule, MultiLevelQueue};
pub use policy::ArloPolicy;
pub use scaling::{ScalingConfig, ScalingRule};
pub use service::ServiceModel;
