//! OTAS's query types (§V, Table II): each request draws a type (its task, latency requirement
//! and utility) and then one of that task's profiled test examples, whose length it takes and
//! whose recorded outcome under each plan it replays (spec §6.4: `correctness/<task>.jsonl` with
//! the plan order of `accuracy.json`, as `morph train adapt --profile-out` writes them).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use morph_core::{AccuracyFileError, PlanAccuracy, ServiceClass, TaskId, Time, TokenPlan, time::ms_to_nanos};
use rand::Rng;
use serde::Deserialize;

use super::{SimRequest, WorkloadError};

/// One query type.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryType {
    /// The task's name in the profile (e.g. `sst2`).
    pub task: String,
    /// l_r: the latency requirement, from arrival.
    pub slo_ms: f64,
    /// u_r: earned when the answer is correct and on time.
    pub utility: f64,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceMix {
    /// Drawn uniformly per request.
    pub types: Vec<QueryType>,
    /// The profile folder holding accuracy.json and correctness/<task>.jsonl.
    pub profile: PathBuf,
    #[serde(skip)]
    pub table: Option<Arc<Correctness>>,
}

/// The profiled test examples of every task: their token lengths and whether each plan
/// classified them correctly.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Correctness {
    pub tasks: Vec<String>,
    pub plans: Vec<TokenPlan>,
    /// Per task: (length, correct per plan in `plans` order).
    pub examples: Vec<Vec<(u32, Vec<bool>)>>,
    /// Accuracy per task on the profiling split, by plan: what a policy plans with.
    pub profiling: BTreeMap<TokenPlan, Vec<f64>>,
}

impl Correctness {
    pub fn load(dir: &Path) -> Result<Self, WorkloadError> {
        let invalid = |e: AccuracyFileError| WorkloadError::Invalid(e.to_string());
        let file = PlanAccuracy::load(dir).map_err(invalid)?;
        let mut examples = Vec::new();
        for task in &file.tasks {
            let lines = file.load_correctness(dir, task).map_err(invalid)?;
            examples.push(
                lines.into_iter().map(|l| (l.len, l.correct.iter().map(|&c| c == 1).collect())).collect(),
            );
        }
        Ok(Self { tasks: file.tasks, plans: file.plans, examples, profiling: file.profiling })
    }

    /// Whether example `example` of `task` is classified correctly under `plan` (a plan the
    /// profile lacks counts as wrong).
    pub fn correct(&self, task: TaskId, example: u32, plan: TokenPlan) -> bool {
        let Some(p) = self.plans.iter().position(|&q| q == plan) else { return false };
        self.examples[usize::from(task.0)][example as usize].1[p]
    }

    /// Mean accuracy per plan and task over the examples (the test split's accuracy table).
    pub fn accuracy(&self) -> BTreeMap<TokenPlan, Vec<f64>> {
        let mean = |rows: &Vec<(u32, Vec<bool>)>, p: usize| {
            rows.iter().filter(|r| r.1[p]).count() as f64 / rows.len().max(1) as f64
        };
        let plans = self.plans.iter().enumerate();
        plans.map(|(p, &plan)| (plan, self.examples.iter().map(|rows| mean(rows, p)).collect())).collect()
    }
}

impl ServiceMix {
    /// Reads the profile (once).
    pub fn load(&mut self) -> Result<&Correctness, WorkloadError> {
        if self.table.is_none() {
            self.table = Some(Arc::new(Correctness::load(&self.profile)?));
        }
        let table = self.table.as_ref().expect("just loaded");
        for t in &self.types {
            if !table.tasks.contains(&t.task) {
                return Err(WorkloadError::Invalid(format!(
                    "query type task '{}' is not in the profile ({:?})",
                    t.task, table.tasks
                )));
            }
        }
        Ok(table)
    }

    /// The table to draw examples from, once the mix can assign: its profile loaded and at
    /// least one query type.
    pub fn ready(&self) -> Result<&Correctness, WorkloadError> {
        let table =
            self.table.as_ref().ok_or_else(|| WorkloadError::Invalid("service profile not loaded".into()))?;
        if self.types.is_empty() {
            return Err(WorkloadError::Invalid("service.types is empty".into()));
        }
        Ok(table)
    }

    /// Draws `r`'s query type and the profiled example of its task it stands for: its task,
    /// deadline and utility, and its length (the example's).
    pub fn assign(&self, table: &Correctness, r: &mut SimRequest, rng: &mut impl Rng) {
        let t = &self.types[rng.random_range(0..self.types.len())];
        let task = table.tasks.iter().position(|n| *n == t.task).unwrap_or(0);
        let examples = &table.examples[task];
        let example = rng.random_range(0..examples.len()) as u32;
        r.input_len = examples[example as usize].0;
        r.example = example;
        r.service = Some(ServiceClass {
            task: TaskId(task as u16),
            deadline: Some(Time(r.arrival.0 + ms_to_nanos(t.slo_ms))),
            utility_micros: (t.utility * 1e6).round() as u32,
        });
    }
}
