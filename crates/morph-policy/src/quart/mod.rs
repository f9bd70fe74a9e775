//! QUART (`papers/quart.txt`, read through `specs/quart.md`): pipeline stages with their own
//! replicas; queueing theory finds the key stages, a PID adds replicas there, a smoother takes
//! surplus back, a CPU compensator adds threads, and key stages are placed where their
//! parameters are cached. One file per mechanism; [`QuartSizer`] runs them in the paper's order
//! inside the shared [`crate::pipeline::PipelinePolicy`].

pub mod baselines;
pub mod budget;
pub mod burst;
pub mod compensator;
pub mod config;
pub mod corrector;
pub mod critical;
pub mod qna;
mod sizer;
pub mod smoother;
#[cfg(test)]
mod tests;

pub use config::{BurstRule, DelaySource, QuartConfig};
pub use sizer::QuartSizer;
