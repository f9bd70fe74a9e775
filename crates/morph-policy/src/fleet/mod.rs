//! Fleets of fixed-shape instances with per-instance queues: Arlo's policy and its baselines.

pub mod config;
mod instances;
pub mod policy;
pub mod scaling;
mod waiting;

pub use config::{FleetConfig, PRESETS, RuntimeSet};
pub use policy::FleetPolicy;
pub use scaling::{ScalingConfig, ScalingRule};
