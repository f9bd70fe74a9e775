//! Baseline policies that Morph's paper policies are measured against.

pub mod cocktail;
pub mod dynamic_batching;
pub mod inferline;
pub mod infless;
pub mod length_buckets;
pub mod uniform;
