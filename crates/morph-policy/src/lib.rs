//! Morph's scheduling policies. Each is a pure [`morph_core::Policy`]: the live server and the
//! simulator drive the same objects.

pub mod arlo;
pub mod baselines;
pub mod fleet;
pub mod length_plan;
pub mod otas;
pub mod pipeline;
pub mod quart;
pub mod registry;
mod replacer;
pub mod ssjf;

pub use baselines::dynamic_batching::{DynamicBatching, DynamicBatchingConfig};
pub use baselines::length_buckets::Bucket;
pub use fleet::{FleetConfig, FleetPolicy};
