//! SSJF (speculative shortest job first): generations ordered by predicted output length.

pub mod policy;
pub mod queue;

pub use policy::{Batching, SsjfConfig, SsjfPolicy};
pub use queue::{Aging, JobQueue, Order};
