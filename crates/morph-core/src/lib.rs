//! Morph's vocabulary: time, requests, units and instances, runtimes, latency profiles, the
//! policy seam ([`Policy`], [`Event`], [`Action`]) and the [`Ledger`] through which the live
//! server and the simulator both apply a policy's actions. No async runtime and no tensor
//! library live here.

pub mod core_line;
pub mod dtype;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
pub mod generation_costs;
pub mod host;
pub mod id_window;
pub mod instance;
pub mod latency_fit;
pub mod latency_profile;
pub mod ledger;
pub mod pipeline;
pub mod plan_accuracy;
pub mod policy;
pub mod pooling;
pub mod prefetch;
pub mod request;
pub mod runtime;
pub mod stats;
pub mod step;
pub mod time;
pub mod token_plan;
pub mod unit;

pub use core_line::{CoreLine, Cores, ModelCores};
pub use dtype::Dtype;
pub use generation_costs::GenerationCosts;
pub use host::{HostId, HostSlots};
pub use id_window::IdWindow;
pub use instance::{InstanceId, InstanceInfo};
pub use latency_fit::LatencyFit;
pub use latency_profile::{LatencyProfile, Point, ProfileError};
pub use ledger::{Effect, Ledger, NewRequest, OnViolation, Outcome};
pub use pipeline::{StageTime, StageTimes};
pub use plan_accuracy::{AccuracyFileError, CorrectnessLine, PlanAccuracy};
pub use policy::{Action, BatchPlan, DropReason, Event, Gauge, InitialPlacement, Policy, Then};
pub use pooling::Pooling;
pub use request::{Generation, RequestId, RequestInfo, ServiceClass, TaskId};
pub use runtime::{Computed, PaddedShape, RuntimeSpec, ShapeKind};
pub use stats::LatencySummary;
pub use step::{Pending, StepBudget, StepFeed, StepPlan};
pub use time::{Nanos, Time};
pub use token_plan::{PlanError, PromptMode, TokenPlan};
pub use unit::{Launched, ModelId, StageSpec, StartKind, Ticket, Tickets, UnitKind, UnitSpec};
