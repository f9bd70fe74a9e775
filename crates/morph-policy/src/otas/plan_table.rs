//! What OTAS plans with (§III-D2 `Profile(B_b, γ)`): per plan of the selection list L(γ),
//! ordered fastest first, its measured latency and its accuracy per task.

use std::sync::Arc;

use morph_core::{LatencyProfile, Nanos, PaddedShape, RuntimeSpec, TokenPlan};

use super::batching::Batch;

/// One plan of L(γ).
#[derive(Debug, Clone)]
pub struct PlanEntry {
    pub plan: TokenPlan,
    /// Latency of a whole batch by rows and padded length (spec A4: measured, not per-sample).
    pub latency: Arc<LatencyProfile>,
    /// Accuracy per task (by task index) on the profiling split.
    pub accuracy: Vec<f64>,
}

/// The selection list with its profile, fastest plan first, most accurate last.
#[derive(Debug, Clone)]
pub struct PlanTable {
    plans: Vec<PlanEntry>,
}

impl PlanTable {
    /// Refuses an empty list and accuracies outside [0, 1].
    pub fn new(plans: Vec<PlanEntry>) -> Result<Self, String> {
        if plans.is_empty() {
            return Err("the plan list is empty".into());
        }
        if let Some(p) = plans.iter().find(|p| p.accuracy.iter().any(|a| !(0.0..=1.0).contains(a))) {
            return Err(format!("plan {}: accuracies must lie in [0, 1]", p.plan));
        }
        Ok(Self { plans })
    }

    /// N_γ.
    pub fn len(&self) -> usize {
        self.plans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.plans.is_empty()
    }

    pub fn plan(&self, index: usize) -> TokenPlan {
        self.plans[index].plan
    }

    /// acc_task(γ); a task the profile does not list counts at the plan's mean accuracy.
    pub fn accuracy(&self, index: usize, task: usize) -> f64 {
        let acc = &self.plans[index].accuracy;
        acc.get(task).copied().unwrap_or_else(|| acc.iter().sum::<f64>() / acc.len().max(1) as f64)
    }

    /// OTAS `Profile(B_b, γ)`: the batch's processing time t̂_b(γ) on `runtime` and its expected
    /// utility Û_b(γ) = Σ_r acc_task(r)(γ) · u_r.
    pub fn estimate(&self, batch: &Batch, index: usize, runtime: RuntimeSpec) -> (Nanos, f64) {
        let shape = runtime.padded_shape(batch.longest(), batch.members.len() as u32);
        let time = self.plans[index].latency.latency(shape);
        let utility =
            batch.members.iter().map(|m| self.accuracy(index, usize::from(m.task.0)) * m.utility).sum();
        (time, utility)
    }

    /// μ(γ): requests per second plan `index` sustains in batches of `rows` rows of `len` tokens
    /// (what f(q) is read from, Alg. 3 line 1).
    pub fn throughput(&self, index: usize, rows: u32, len: u32) -> f64 {
        let ms = self.plans[index].latency.latency_ms(PaddedShape { len, batch: rows });
        f64::from(rows) * 1e3 / ms.max(1e-9)
    }
}
