//! Baseline policies that Morph's paper policies are measured against.

pub mod dynamic_batching;
