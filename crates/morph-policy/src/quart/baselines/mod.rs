//! The pipeline baselines QUART is measured against (spec §2.5), each a [`crate::pipeline::Sizer`]
//! inside the same executor: INFless-like, InferLine-like, Cocktail-like, and scaling the whole
//! pipeline uniformly.

pub mod cocktail;
pub mod inferline;
pub mod infless;
pub mod uniform;

use crate::pipeline::PoolView;

/// The requests waiting at every stage as a rate that drains them over `drain_s` seconds (0:
/// none): what a baseline adds to its rate so a backlog it starts with, or one a burst left,
/// is cleared rather than carried.
pub(crate) fn backlog_rate(view: &PoolView<'_>, drain_s: f64) -> f64 {
    match drain_s > 0.0 {
        true => view.stages.iter().map(|s| s.queued).sum::<usize>() as f64 / drain_s,
        false => 0.0,
    }
}
