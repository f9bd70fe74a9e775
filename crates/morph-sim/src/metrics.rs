//! What one simulated run measured, per policy.

use morph_core::stats::percentile;
use morph_core::{Nanos, Time, time::nanos_to_ms};
use serde::Serialize;

/// Queue-length samples kept per run (for plots), evenly spaced over the run.
const QUEUE_SAMPLES: u64 = 200;

#[derive(Debug)]
pub(crate) struct Recorder {
    latencies: Vec<Nanos>,
    dropped: usize,
    busy: Vec<Nanos>,
    sample_every: Nanos,
    next_sample: Time,
    queue: Vec<(f64, usize)>,
}

impl Recorder {
    pub(crate) fn new(instances: usize, horizon: Nanos, expected: usize) -> Self {
        Self {
            latencies: Vec::with_capacity(expected),
            dropped: 0,
            busy: vec![0; instances],
            sample_every: (horizon / QUEUE_SAMPLES).max(1),
            next_sample: Time::ZERO,
            queue: Vec::new(),
        }
    }

    pub(crate) fn completed(&mut self, latency: Nanos) {
        self.latencies.push(latency);
    }

    pub(crate) fn dropped(&mut self) {
        self.dropped += 1;
    }

    pub(crate) fn busy(&mut self, instance: usize, span: Nanos) {
        self.busy[instance] += span;
    }

    /// Records the queue length at each sample point passed by `now`.
    pub(crate) fn queue(&mut self, now: Time, len: usize) {
        while self.next_sample <= now {
            self.queue.push((self.next_sample.as_millis_f64() / 1e3, len));
            self.next_sample = self.next_sample + self.sample_every;
        }
    }

    pub(crate) fn report(self, policy: String, requests: usize, end: Time, slo: Option<Nanos>) -> Report {
        let span_s = (end.0 as f64 / 1e9).max(f64::MIN_POSITIVE);
        let mut ms: Vec<f64> = self.latencies.iter().map(|l| nanos_to_ms(*l)).collect();
        ms.sort_by(f64::total_cmp);
        let within = match slo {
            Some(slo) => self.latencies.iter().filter(|l| **l <= slo).count(),
            None => self.latencies.len(),
        };
        let completed = self.latencies.len();
        let utilisation: Vec<f64> = self.busy.iter().map(|b| *b as f64 / 1e9 / span_s).collect();
        Report {
            policy,
            requests,
            completed,
            dropped: self.dropped,
            mean_latency_ms: if completed == 0 { 0.0 } else { ms.iter().sum::<f64>() / completed as f64 },
            p50_latency_ms: percentile(&ms, 0.50),
            p98_latency_ms: percentile(&ms, 0.98),
            p99_latency_ms: percentile(&ms, 0.99),
            max_latency_ms: ms.last().copied().unwrap_or(0.0),
            slo_attainment: if requests == 0 { 1.0 } else { within as f64 / requests as f64 },
            throughput_rps: completed as f64 / span_s,
            goodput_rps: within as f64 / span_s,
            duration_s: span_s,
            instance_seconds: self.busy.len() as f64 * span_s,
            mean_utilisation: utilisation.iter().sum::<f64>() / utilisation.len().max(1) as f64,
            utilisation,
            queue_over_time: self.queue,
            latencies_ms: ms,
        }
    }
}

/// One policy's results. Latencies are end to end: arrival to batch completion.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub policy: String,
    pub requests: usize,
    pub completed: usize,
    pub dropped: usize,
    pub mean_latency_ms: f64,
    pub p50_latency_ms: f64,
    pub p98_latency_ms: f64,
    pub p99_latency_ms: f64,
    pub max_latency_ms: f64,
    /// Share of all requests completed within the SLO (dropped ones count as missed).
    pub slo_attainment: f64,
    pub throughput_rps: f64,
    /// Completions within the SLO per second.
    pub goodput_rps: f64,
    /// From time 0 to the last event.
    pub duration_s: f64,
    /// Time-weighted instance count × duration (GPU-seconds for GPU instances).
    pub instance_seconds: f64,
    pub mean_utilisation: f64,
    #[serde(skip)]
    pub utilisation: Vec<f64>,
    /// `(seconds, sequences waiting)`, evenly sampled.
    #[serde(skip)]
    pub queue_over_time: Vec<(f64, usize)>,
    /// Sorted, for CDFs.
    #[serde(skip)]
    pub latencies_ms: Vec<f64>,
}
