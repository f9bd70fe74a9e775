//! Morph's live driver: the HTTP API (axum), the policy driven in real time, engine workers on
//! their own threads, and Prometheus metrics.

pub mod api;
mod build;
pub mod connections;
pub mod deployment;
pub mod drain;
pub mod driver;
pub mod error;
pub mod infer;
pub mod launcher;
pub mod metrics;
pub mod prediction;
pub mod server;
pub mod stage_timing;
pub mod starting;

pub use connections::ConnectionLimits;
pub use deployment::{BuildError, Deployment, Preloaded};
pub use error::CallError;
pub use launcher::{Instance, InstanceEngine, Launcher};
pub use server::Server;
pub use starting::StartupSteps;
