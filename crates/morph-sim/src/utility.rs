//! OTAS's measures of a run (§V-A): the utility earned (u_r for each answer that is correct and
//! on time), the outcome types 1–4, the plans' shares of batches, and the accuracy of served
//! batches, from each request's recorded correctness under the plan its batch ran (spec A18).

use std::collections::{BTreeMap, HashMap};

use morph_core::{Outcome, Time, TokenPlan};
use serde::Serialize;

use crate::metrics::Report;
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

/// The utility account of `report`, a run of `requests` (arrivals before `warmup` not counted).
pub fn evaluate(
    requests: &[SimRequest],
    report: &Report,
    table: &Correctness,
    warmup: Time,
) -> UtilityReport {
    let mut ran: HashMap<u32, (morph_core::TokenPlan, Time)> = HashMap::new();
    let mut batches_by_plan = BTreeMap::new();
    let mut batch_accuracy = Vec::with_capacity(report.served.len());
    // Per bin: the sum of its batches' accuracies and their count.
    let mut accuracy_bins: Vec<(f64, usize)> = Vec::new();
    for b in &report.served {
        *batches_by_plan.entry(b.plan).or_default() += 1;
        let mut right = 0;
        for &r in &b.requests {
            ran.insert(r, (b.plan, b.end));
            let req = &requests[r as usize];
            if let Some(s) = req.service {
                right += usize::from(table.correct(s.task, req.example, b.plan));
            }
        }
        let accuracy = right as f64 / b.requests.len().max(1) as f64;
        batch_accuracy.push(accuracy);
        let bin = (b.end.as_millis_f64() / 1e3 / BIN_S) as usize;
        if accuracy_bins.len() <= bin {
            accuracy_bins.resize(bin + 1, (0.0, 0));
        }
        accuracy_bins[bin].0 += accuracy;
        accuracy_bins[bin].1 += 1;
    }
    let accuracy_over_time = accuracy_bins
        .iter()
        .enumerate()
        .filter(|(_, (_, n))| *n > 0)
        .map(|(k, (sum, n))| ((k + 1) as f64 * BIN_S, sum / *n as f64))
        .collect();
    let (mut utility, mut attainable, mut counts) = (0.0, 0.0, [0usize; 4]);
    let mut bins: Vec<f64> = Vec::new();
    for (i, req) in requests.iter().enumerate().filter(|(_, r)| r.arrival >= warmup) {
        let Some(service) = req.service else { continue };
        let u = f64::from(service.utility_micros) / 1e6;
        attainable += u;
        let deadline = service.deadline.unwrap_or(Time(u64::MAX));
        let kind = match (report.outcomes.get(i).cloned().flatten(), ran.get(&(i as u32))) {
            (Some(Outcome::Done), Some(&(plan, end))) if end < deadline => {
                if table.correct(service.task, req.example, plan) { 0 } else { 1 }
            }
            (Some(Outcome::Done), _) => 2,
            _ => 3,
        };
        counts[kind] += 1;
        if kind == 0 {
            utility += u;
            let bin = (req.arrival.as_millis_f64() / 1e3 / BIN_S) as usize;
            if bins.len() <= bin {
                bins.resize(bin + 1, 0.0);
            }
            bins[bin] += u;
        }
    }
    let total = counts.iter().sum::<usize>().max(1) as f64;
    let mut earned = 0.0;
    let over_time = bins
        .iter()
        .enumerate()
        .map(|(k, u)| {
            earned += u;
            ((k + 1) as f64 * BIN_S, earned)
        })
        .collect();
    UtilityReport {
        utility,
        attainable,
        types: counts.map(|c| c as f64 / total),
        batches_by_plan,
        mean_batch_accuracy: batch_accuracy.iter().sum::<f64>() / batch_accuracy.len().max(1) as f64,
        over_time,
        accuracy_over_time,
    }
}
