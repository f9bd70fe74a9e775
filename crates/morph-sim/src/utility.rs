//! OTAS's measures of a run (§V-A): the utility earned (u_r for each answer that is correct and
//! on time), the outcome types 1–4, the plans' shares of batches, and the accuracy of served
//! batches, from each request's recorded correctness under the plan its batch ran (spec A18).

use std::collections::BTreeMap;
use std::sync::Arc;

use morph_core::{Outcome, Time, TokenPlan};
use serde::Serialize;

use crate::workload::{Correctness, SimRequest};

/// Width of the utility-over-time bins.
const BIN_S: f64 = 10.0;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UtilityReport {
    /// Σ u_r over type-1 requests.
    pub utility: f64,
    /// Σ u_r over every measured request with a service class: the most a server could earn.
    pub attainable: f64,
    /// Shares of measured requests: 1 correct and on time, 2 wrong but on time, 3 answered
    /// late, 4 evicted or refused before running.
    pub types: [f64; 4],
    /// Batches per plan.
    pub batches_by_plan: BTreeMap<TokenPlan, usize>,
    /// Mean over served batches of the share of their requests answered correctly (Fig. 11).
    pub mean_batch_accuracy: f64,
    /// `(seconds, utility earned up to then)`, per bin of arrivals.
    #[serde(skip)]
    pub over_time: Vec<(f64, f64)>,
    /// The mean accuracy of the batches that ended in each bin (OTAS Fig. 11), `(bin end s, accuracy)`.
    #[serde(skip)]
    pub accuracy_over_time: Vec<(f64, f64)>,
}

/// OTAS's account of a run, kept as it runs: each batch of requests with service classes when
/// it starts, each such request when it is answered.
#[derive(Debug)]
pub(crate) struct UtilityAccount {
    table: Arc<Correctness>,
    /// Requests arriving before this are not counted.
    warmup: Time,
    utility: f64,
    attainable: f64,
    counts: [usize; 4],
    batches_by_plan: BTreeMap<TokenPlan, usize>,
    accuracy_sum: f64,
    batches: usize,
    /// Per bin of batch ends: the sum of their accuracies and their count.
    accuracy_bins: Vec<(f64, usize)>,
    /// Utility earned per bin of arrivals.
    bins: Vec<f64>,
}

fn bin_of(t: Time) -> usize {
    (t.as_millis_f64() / 1e3 / BIN_S) as usize
}

fn grown<T: Clone + Default>(bins: &mut Vec<T>, k: usize) -> &mut T {
    if bins.len() <= k {
        bins.resize(k + 1, T::default());
    }
    &mut bins[k]
}

impl UtilityAccount {
    pub(crate) fn new(table: Arc<Correctness>, warmup: Time) -> Self {
        Self {
            table,
            warmup,
            utility: 0.0,
            attainable: 0.0,
            counts: [0; 4],
            batches_by_plan: BTreeMap::new(),
            accuracy_sum: 0.0,
            batches: 0,
            accuracy_bins: Vec::new(),
            bins: Vec::new(),
        }
    }

    /// A batch of `requests` (with service classes) runs under `plan` and ends at `end`.
    pub(crate) fn batch(&mut self, plan: TokenPlan, end: Time, requests: &[&SimRequest]) {
        *self.batches_by_plan.entry(plan).or_default() += 1;
        let right = requests
            .iter()
            .filter(|r| r.service.is_some_and(|s| self.table.correct(s.task, r.example, plan)))
            .count();
        let accuracy = right as f64 / requests.len().max(1) as f64;
        self.accuracy_sum += accuracy;
        self.batches += 1;
        let bin = grown(&mut self.accuracy_bins, bin_of(end));
        bin.0 += accuracy;
        bin.1 += 1;
    }

    /// `request` was answered with `outcome`; `ran`: the plan and end of the batch it ran in.
    pub(crate) fn answered(
        &mut self,
        request: &SimRequest,
        outcome: &Outcome,
        ran: Option<(TokenPlan, Time)>,
    ) {
        let Some(service) = request.service.filter(|_| request.arrival >= self.warmup) else { return };
        let u = f64::from(service.utility_micros) / 1e6;
        self.attainable += u;
        let deadline = service.deadline.unwrap_or(Time(u64::MAX));
        let kind = match (outcome, ran) {
            (Outcome::Done, Some((plan, end))) if end < deadline => {
                if self.table.correct(service.task, request.example, plan) { 0 } else { 1 }
            }
            (Outcome::Done, _) => 2,
            _ => 3,
        };
        self.counts[kind] += 1;
        if kind == 0 {
            self.utility += u;
            *grown(&mut self.bins, bin_of(request.arrival)) += u;
        }
    }

    pub(crate) fn report(self) -> UtilityReport {
        let accuracy_over_time = self
            .accuracy_bins
            .iter()
            .enumerate()
            .filter(|(_, (_, n))| *n > 0)
            .map(|(k, (sum, n))| ((k + 1) as f64 * BIN_S, sum / *n as f64))
            .collect();
        let total = self.counts.iter().sum::<usize>().max(1) as f64;
        let mut earned = 0.0;
        let over_time = self
            .bins
            .iter()
            .enumerate()
            .map(|(k, u)| {
                earned += u;
                ((k + 1) as f64 * BIN_S, earned)
            })
            .collect();
        UtilityReport {
            utility: self.utility,
            attainable: self.attainable,
            types: self.counts.map(|c| c as f64 / total),
            batches_by_plan: self.batches_by_plan,
            mean_batch_accuracy: self.accuracy_sum / self.batches.max(1) as f64,
            over_time,
            accuracy_over_time,
        }
    }
}
