//! Morph's simulator. It is not a model of the system: it drives the same policy objects as
//! `morph serve`, in virtual time (integer nanoseconds), with batch times from a cost model.
//! Same scenario and seed, byte-identical results.

pub mod cost;
pub mod driver;
pub mod event;
mod hosts;
pub mod metrics;
pub mod partitions;
mod price_table;
pub mod scenario;
pub mod shared_host;
pub mod utility;
pub mod workload;

pub use cost::{CostModel, PipelineCost, ProfileCost};
pub use driver::{SimOptions, simulate};
pub use metrics::{Answer, Interval, Report, WindowReport};
pub use partitions::{Partition, simulate_partitioned};
pub use scenario::{Scenario, ScenarioError};
pub use shared_host::{HostReport, HostedModel, Sharing, simulate_host};
pub use workload::{Predictor, SimRequest, Workload};
