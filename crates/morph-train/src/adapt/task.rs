//! What `morph train adapt` holds per task while it trains heads and prompts: the task's
//! encoded splits, and what one (task, plan) measured.

use crate::tasks::data::Task;

/// A task's splits as token ids and labels.
pub(super) struct Encoded {
    pub task: Task,
    pub train: (Vec<Vec<u32>>, Vec<u32>),
    pub profiling: (Vec<Vec<u32>>, Vec<u32>),
    pub test: (Vec<Vec<u32>>, Vec<u32>),
}

/// What one (task, plan) measured.
pub(super) struct Measured {
    pub profiling: f64,
    pub test: f64,
    /// Per test example: whether the plan got it right.
    pub correct: Vec<bool>,
}
