//! morph-sim's integration tests, one binary (each file a module: one link instead of one per file).

mod arlo_fleet;
mod corpus_lengths;
mod determinism;
mod otas_utility;
mod quart_pipeline;
mod queueing_theory;
mod shared_host;
mod shipped_scenarios;
mod ssjf_modes;
mod warnings;
