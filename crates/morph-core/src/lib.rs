//! Morph's vocabulary: time, requests, instances, runtimes, latency profiles, and the policy
//! seam ([`Policy`], [`Event`], [`Action`]) shared by the live server and the simulator.
//! No async runtime and no tensor library live here.

pub mod instance;
pub mod policy;
pub mod profile;
pub mod request;
pub mod runtime;
pub mod stats;
pub mod time;

pub use instance::{InstanceId, InstanceInfo};
pub use policy::{Action, Event, Policy, RejectReason};
pub use profile::{Profile, ProfileError};
pub use request::{Generation, RequestId, RequestInfo};
pub use runtime::{PaddedShape, RuntimeSpec, ShapeKind};
pub use stats::LatencySummary;
pub use time::{Nanos, Time};
