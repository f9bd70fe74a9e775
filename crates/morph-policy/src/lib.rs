//! Morph's scheduling policies. Each is a pure [`morph_core::Policy`]: the live server and the
//! simulator drive the same objects. [`registry`] names them all and builds them.
//!
//! | module | policy |
//! |---|---|
//! | [`batching`] | Morph's default: dynamic batching in length buckets read off the engine's profile (TEI's single FIFO without buckets) |
//! | [`arlo`] | Arlo's fixed-shape runtimes, allocator and multi-level dispatch, and Arlo's baselines |
//! | [`ssjf`] | SSJF: shortest-predicted-first generation (FCFS its baseline) |
//! | [`pipeline`], [`quart`] | pipelines of stages with their own replicas; QUART's sizer and its baselines |
//! | [`otas`] | OTAS: per-batch token plans chosen for utility within deadlines, and its baselines |
//! | [`give_up`] | around any of them: requests that can no longer be answered in time are given up (`--deadline-ms`) |
//!
//! [`queueing`] holds the queueing formulas QUART's sizer and Arlo's allocation share.

pub mod arlo;
pub mod batching;
pub mod cores;
pub mod give_up;
pub mod otas;
pub mod pipeline;
pub mod quart;
pub mod queueing;
pub mod registry;
mod replacer;
pub mod ssjf;
pub mod step;

pub use arlo::{ArloConfig, ArloPolicy};
pub use batching::buckets::Bucket;
pub use batching::{DynamicBatching, DynamicBatchingConfig};
