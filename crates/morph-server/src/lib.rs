//! Morph's live driver: the HTTP API (axum), the policy driven in real time, engine workers on
//! their own threads, and Prometheus metrics.

pub mod api;
pub mod app;
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
pub mod prompts;
pub mod server;
pub mod stage_timing;
pub mod starting;

pub use app::{App, HostedSpec};
pub use connections::ConnectionLimits;
pub use deployment::{BuildError, Deployment, Preloaded};
pub use error::CallError;
pub use launcher::{Instance, InstanceEngine, Launcher};
pub use server::{Server, Serving};
pub use starting::StartupSteps;
