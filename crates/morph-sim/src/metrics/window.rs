//! A window of requests by arrival time (the warm-up, or the measured run after it): how many
//! arrived, how each ended, and the latencies of those served.

use std::collections::BTreeMap;

use morph_core::{DropReason, Nanos, Outcome};
use serde::Serialize;

use super::latencies::Latencies;

#[derive(Debug, Default)]
pub(crate) struct Window {
    requests: usize,
    latencies: Latencies,
    /// Completed after the SLO.
    late: usize,
    dropped: usize,
    dropped_by: BTreeMap<&'static str, usize>,
    cancelled: usize,
}

impl Window {
    pub(crate) fn arrived(&mut self) {
        self.requests += 1;
    }

    /// A request of this window ended with `outcome` after `latency`.
    pub(crate) fn answered(&mut self, outcome: &Outcome, latency: Nanos, slo: Option<Nanos>) {
        match outcome {
            Outcome::Done => {
                self.latencies.record(latency);
                self.late += usize::from(slo.is_some_and(|slo| latency > slo));
            }
            Outcome::Cancelled => self.cancelled += 1,
            Outcome::Failed | Outcome::Dropped(_) | Outcome::PolicyError => {
                self.dropped += 1;
                *self.dropped_by.entry(drop_kind(outcome)).or_default() += 1;
            }
        }
    }

    /// Takes in another window's requests (another partition's, of the same span).
    pub(crate) fn absorb(&mut self, other: Window) {
        self.requests += other.requests;
        self.latencies.absorb(&other.latencies);
        self.late += other.late;
        self.dropped += other.dropped;
        for (kind, n) in other.dropped_by {
            *self.dropped_by.entry(kind).or_default() += n;
        }
        self.cancelled += other.cancelled;
    }

    pub(crate) fn latencies(&self) -> &Latencies {
        &self.latencies
    }

    /// The window's figures; its rates over `span_s` seconds.
    pub(crate) fn report(&self, span_s: f64) -> WindowReport {
        let completed = self.latencies.count();
        let within = completed - self.late;
        let span_s = span_s.max(f64::MIN_POSITIVE);
        WindowReport {
            requests: self.requests,
            completed,
            dropped: self.dropped,
            dropped_by: self.dropped_by.iter().map(|(k, n)| (k.to_string(), *n)).collect(),
            cancelled: self.cancelled,
            late: self.late,
            mean_latency_ms: self.latencies.mean_ms(),
            p50_latency_ms: self.latencies.quantile_ms(0.50),
            p98_latency_ms: self.latencies.quantile_ms(0.98),
            p99_latency_ms: self.latencies.quantile_ms(0.99),
            max_latency_ms: self.latencies.max_ms(),
            slo_attainment: if self.requests == 0 { f64::NAN } else { within as f64 / self.requests as f64 },
            throughput_rps: completed as f64 / span_s,
            goodput_rps: within as f64 / span_s,
        }
    }
}

/// One window's results. Latencies are end to end, arrival to answer, of the requests that
/// arrived in the window; quantiles are within [`super::QUANTILE_ERROR`] of the exact ones, the
/// mean and maximum exact.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowReport {
    /// Requests that arrived in the window.
    pub requests: usize,
    pub completed: usize,
    pub dropped: usize,
    /// The dropped requests by why (`too long for every runtime`, `queue full`, …).
    pub dropped_by: BTreeMap<String, usize>,
    /// Requests whose client left before their answer.
    pub cancelled: usize,
    /// Completed after the SLO (0 without one).
    pub late: usize,
    pub mean_latency_ms: f64,
    pub p50_latency_ms: f64,
    pub p98_latency_ms: f64,
    pub p99_latency_ms: f64,
    pub max_latency_ms: f64,
    /// Share of the window's requests completed within the SLO (dropped and cancelled ones count
    /// as missed); NaN (`null` in JSON, `-` in tables) when none arrived.
    pub slo_attainment: f64,
    /// Completions, and completions within the SLO, per second of the window.
    pub throughput_rps: f64,
    pub goodput_rps: f64,
}

/// Why a request that was not served was not: its reason's kind, for counts and warnings.
pub fn drop_kind(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Dropped(DropReason::NoRuntimeFits { .. }) => "too long for every runtime",
        Outcome::Dropped(DropReason::QueueFull { .. }) => "queue full",
        Outcome::Dropped(DropReason::DeadlineUnreachable { .. }) => "deadline unreachable",
        Outcome::Failed => "engine failed",
        Outcome::PolicyError => "policy error",
        Outcome::Done | Outcome::Cancelled => "served",
    }
}
