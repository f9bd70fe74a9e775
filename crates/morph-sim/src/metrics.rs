//! What one simulated run measured, per policy.

use std::collections::BTreeMap;

use morph_core::{
    DropReason, Gauge, Nanos, Outcome, Policy, Time, TokenPlan, stats::percentile, time::nanos_to_ms,
};
use serde::Serialize;

/// Queue-length samples kept per run (for plots), evenly spaced over the arrivals' span.
const QUEUE_SAMPLES: u64 = 200;

/// Per-stage gauges kept over time (their means are kept for every gauge).
pub const STAGE_SERIES: [&str; 7] = [
    "stage_queue",
    "stage_replicas",
    "stage_target_replicas",
    "stage_needed_replicas",
    "stage_busy",
    "stage_cv",
    "stage_observed_delay_seconds",
];
/// The shortest interval between queue samples (a stream of one request spans no time).
const MIN_SAMPLE_INTERVAL: Nanos = 1_000_000;

#[derive(Debug)]
pub(crate) struct Recorder {
    latencies: Vec<Nanos>,
    /// Requests measured (arrived after the warm-up).
    requests: usize,
    dropped: usize,
    dropped_by: BTreeMap<&'static str, usize>,
    cancelled: usize,
    /// How each request of the stream ended, by id (measured or not).
    outcomes: Vec<Option<Outcome>>,
    /// Busy time per instance id.
    busy: Vec<Nanos>,
    /// Instances holding a slot: changes `(time, count)`.
    slots: Vec<(Time, usize)>,
    sample_every: Nanos,
    next_sample: Time,
    queue: Vec<(f64, usize)>,
    /// Sums and counts of the policy's gauges, sampled at its ticks after the warm-up.
    gauges: BTreeMap<String, (f64, usize)>,
    /// The per-stage gauges over time, at most one sample per `sample_every`.
    stage_series: Vec<(f64, String, f64)>,
    next_stage_sample: Time,
    pub(crate) cold_starts: usize,
    pub(crate) warm_starts: usize,
    pub(crate) evictions: usize,
    /// Batches of requests with a service class (OTAS): their plan, end and requests.
    pub(crate) served: Vec<ServedBatch>,
}

/// A batch of requests with service classes, as it ran.
#[derive(Debug, Clone, PartialEq)]
pub struct ServedBatch {
    pub plan: TokenPlan,
    /// When it ended (its requests were answered then).
    pub end: Time,
    /// Request indices in the stream.
    pub requests: Vec<u32>,
}

impl Recorder {
    /// `instances`: the initial ones (launched ones are added as they run).
    pub(crate) fn new(instances: usize, horizon: Nanos, requests: usize) -> Self {
        Self {
            latencies: Vec::with_capacity(requests),
            requests,
            dropped: 0,
            dropped_by: BTreeMap::new(),
            cancelled: 0,
            outcomes: Vec::new(),
            busy: vec![0; instances],
            slots: Vec::new(),
            sample_every: (horizon / QUEUE_SAMPLES).max(MIN_SAMPLE_INTERVAL),
            next_sample: Time::ZERO,
            queue: Vec::new(),
            gauges: BTreeMap::new(),
            stage_series: Vec::new(),
            next_stage_sample: Time::ZERO,
            cold_starts: 0,
            warm_starts: 0,
            evictions: 0,
            served: Vec::new(),
        }
    }

    pub(crate) fn completed(&mut self, latency: Nanos) {
        self.latencies.push(latency);
    }

    /// A measured request was not served, for `why`.
    pub(crate) fn dropped(&mut self, why: &Outcome) {
        self.dropped += 1;
        *self.dropped_by.entry(drop_kind(why)).or_default() += 1;
    }

    pub(crate) fn cancelled(&mut self) {
        self.cancelled += 1;
    }

    /// Request `index` of the stream ended with `outcome`.
    pub(crate) fn outcome(&mut self, index: usize, outcome: Outcome) {
        if self.outcomes.len() <= index {
            self.outcomes.resize(index + 1, None);
        }
        self.outcomes[index] = Some(outcome);
    }

    pub(crate) fn busy(&mut self, instance: usize, span: Nanos) {
        if self.busy.len() <= instance {
            self.busy.resize(instance + 1, 0);
        }
        self.busy[instance] += span;
    }

    /// From `now` on, `count` instances hold a slot.
    pub(crate) fn slots(&mut self, now: Time, count: usize) {
        self.slots.push((now, count));
    }

    /// Records the queue length at each sample point passed by `now`.
    pub(crate) fn queue(&mut self, now: Time, len: usize) {
        while self.next_sample <= now {
            self.queue.push((self.next_sample.as_millis_f64() / 1e3, len));
            self.next_sample = self.next_sample + self.sample_every;
        }
    }

    /// `warmup`: when measurement started (throughput counts from there).
    /// One sample of the policy's gauges at `now`, each keyed `name{label=value,…}`; the
    /// per-stage ones of [`STAGE_SERIES`] are also kept over time.
    pub(crate) fn gauges(&mut self, now: Time, gauges: Vec<Gauge>) {
        let series_due = now >= self.next_stage_sample;
        if series_due {
            self.next_stage_sample = now + self.sample_every;
        }
        for g in gauges {
            let labels: Vec<String> = g.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let key = if labels.is_empty() { g.name } else { format!("{}{{{}}}", g.name, labels.join(",")) };
            if series_due && STAGE_SERIES.iter().any(|name| key.starts_with(&format!("{name}{{"))) {
                self.stage_series.push((now.as_millis_f64() / 1e3, key.clone(), g.value));
            }
            let entry = self.gauges.entry(key).or_insert((0.0, 0));
            entry.0 += g.value;
            entry.1 += 1;
        }
    }

    pub(crate) fn report(self, policy: &dyn Policy, end: Time, warmup: Time, slo: Option<Nanos>) -> Report {
        let requests = self.requests;
        let span_s = (end.0 as f64 / 1e9).max(f64::MIN_POSITIVE);
        let measured_s = (end.0.saturating_sub(warmup.0) as f64 / 1e9).max(f64::MIN_POSITIVE);
        let mut instance_seconds = 0.0;
        for (k, (t, n)) in self.slots.iter().enumerate() {
            let until = self.slots.get(k + 1).map_or(end, |s| s.0);
            instance_seconds += *n as f64 * (until.0.saturating_sub(t.0) as f64 / 1e9);
        }
        let instances_over_time: Vec<(f64, usize)> =
            self.slots.iter().map(|(t, n)| (t.as_millis_f64() / 1e3, *n)).collect();
        let mut ms: Vec<f64> = self.latencies.iter().map(|l| nanos_to_ms(*l)).collect();
        ms.sort_by(f64::total_cmp);
        let within = match slo {
            Some(slo) => self.latencies.iter().filter(|l| **l <= slo).count(),
            None => self.latencies.len(),
        };
        let completed = self.latencies.len();
        let utilisation: Vec<f64> = self.busy.iter().map(|b| *b as f64 / 1e9 / span_s).collect();
        Report {
            policy: policy.name().to_string(),
            policy_state: policy.describe(),
            requests,
            completed,
            dropped: self.dropped,
            dropped_by: self.dropped_by.into_iter().map(|(k, n)| (k.to_string(), n)).collect(),
            cancelled: self.cancelled,
            outcomes: self.outcomes,
            mean_latency_ms: if completed == 0 { 0.0 } else { ms.iter().sum::<f64>() / completed as f64 },
            p50_latency_ms: percentile(&ms, 0.50),
            p98_latency_ms: percentile(&ms, 0.98),
            p99_latency_ms: percentile(&ms, 0.99),
            max_latency_ms: ms.last().copied().unwrap_or(0.0),
            slo_attainment: if requests == 0 { f64::NAN } else { within as f64 / requests as f64 },
            throughput_rps: completed as f64 / measured_s,
            goodput_rps: within as f64 / measured_s,
            duration_s: span_s,
            instance_seconds,
            mean_instances: instance_seconds / span_s,
            mean_utilisation: self.busy.iter().sum::<Nanos>() as f64
                / 1e9
                / instance_seconds.max(f64::MIN_POSITIVE),
            utilisation,
            instances_over_time,
            queue_over_time: self.queue,
            gauge_means: self.gauges.into_iter().map(|(k, (sum, n))| (k, sum / n as f64)).collect(),
            stage_series: self.stage_series,
            cold_starts: self.cold_starts,
            warm_starts: self.warm_starts,
            cache_evictions: self.evictions,
            latencies_ms: ms,
            served: self.served,
        }
    }
}

/// One policy's results. Latencies are end to end: arrival to batch completion; requests that
/// arrived during the warm-up are not counted anywhere.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub policy: String,
    pub requests: usize,
    pub completed: usize,
    pub dropped: usize,
    /// The dropped requests by why (`too long for every runtime`, `queue full`, …).
    pub dropped_by: BTreeMap<String, usize>,
    /// Requests whose client left before their answer.
    pub cancelled: usize,
    /// How each request of the stream ended, by index (`None`: never answered).
    #[serde(skip)]
    pub outcomes: Vec<Option<Outcome>>,
    pub mean_latency_ms: f64,
    pub p50_latency_ms: f64,
    pub p98_latency_ms: f64,
    pub p99_latency_ms: f64,
    pub max_latency_ms: f64,
    /// Share of all requests completed within the SLO (dropped ones count as missed); NaN
    /// (`null` in JSON, `-` in tables) when no request was measured.
    pub slo_attainment: f64,
    pub throughput_rps: f64,
    /// Completions within the SLO per second (both rates over the measured span, after warm-up).
    pub goodput_rps: f64,
    /// From time 0 to the last event.
    pub duration_s: f64,
    /// Time-weighted instance count × duration (GPU-seconds for GPU instances).
    pub instance_seconds: f64,
    /// Time-weighted instance count (Arlo Fig. 8).
    pub mean_instances: f64,
    /// Busy share of the instance-seconds.
    pub mean_utilisation: f64,
    /// Busy share of the run per instance id.
    #[serde(skip)]
    pub utilisation: Vec<f64>,
    /// `(seconds, instances holding a slot)` at every change.
    #[serde(skip)]
    pub instances_over_time: Vec<(f64, usize)>,
    /// `(seconds, sequences waiting)`, evenly sampled.
    #[serde(skip)]
    pub queue_over_time: Vec<(f64, usize)>,
    /// The policy's gauges averaged over its ticks after the warm-up (per-stage queues,
    /// replicas, CVs, delays), keyed `name{label=value}`.
    pub gauge_means: BTreeMap<String, f64>,
    /// `(seconds, gauge{stage=k}, value)` of the per-stage gauges over time (queue, replicas,
    /// busy replicas, measured CV, observed delay), evenly sampled after the warm-up.
    #[serde(skip)]
    pub stage_series: Vec<(f64, String, f64)>,
    /// Launches that started from disk, and from parameters in host memory.
    pub cold_starts: usize,
    pub warm_starts: usize,
    /// Parameters dropped from host caches over their budget.
    pub cache_evictions: usize,
    /// Sorted, for CDFs.
    #[serde(skip)]
    pub latencies_ms: Vec<f64>,
    /// The policy's own account of itself at the end of the run ([`morph_core::Policy::describe`]).
    pub policy_state: serde_json::Value,
    /// Batches of requests with service classes, in start order.
    #[serde(skip)]
    pub served: Vec<ServedBatch>,
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
