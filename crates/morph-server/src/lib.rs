//! Morph's live driver: the HTTP API (axum), the policy driven in real time, engine workers on
//! their own threads, and Prometheus metrics.

pub mod api;
mod build;
pub mod cluster;
pub mod config;
pub mod connections;
pub mod drain;
pub mod driver;
pub mod error;
pub mod host;
pub mod infer;
pub mod launcher;
mod locking;
pub mod metrics;
pub mod prediction;
pub mod server;
pub mod stage_timing;

pub use config::{BuildError, ServerConfig};
pub use connections::ConnectionLimits;
pub use error::CallError;
pub use launcher::{Instance, InstanceEngine, Launcher};
pub use server::Server;
