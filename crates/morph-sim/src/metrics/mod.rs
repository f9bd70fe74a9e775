//! What one simulated run measured, per policy, in streaming form: every figure is kept as the
//! run goes (counters, histograms, intervals), so memory does not grow with the requests.
//! Requests are counted by arrival time in the warm-up window (if any) or the measured window
//! after it, and in the run's intervals from t = 0; nothing that happens is dropped from the
//! report.

mod gaps;
mod latencies;
mod merge;
mod timeline;
mod window;

use std::collections::BTreeMap;

pub use gaps::ArrivalGaps;
pub use latencies::{Latencies, QUANTILE_ERROR};
use morph_core::{Gauge, Nanos, Outcome, Time, TokenPlan};
use serde::Serialize;
pub use timeline::Interval;
use timeline::Timeline;
use window::Window;
pub use window::{WindowReport, drop_kind};

use crate::utility::{UtilityAccount, UtilityReport};
use crate::workload::SimRequest;

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
/// Points of the latency CDF a report keeps (for plots).
const CDF_POINTS: usize = 1001;

/// How one request ended (kept per request only when asked: [`crate::SimOptions::per_request`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub outcome: Outcome,
    /// From its arrival to its answer.
    pub latency: Nanos,
}

#[derive(Debug)]
pub(crate) struct Recorder {
    warmup: Time,
    slo: Option<Nanos>,
    warming: Window,
    measured: Window,
    timeline: Timeline,
    /// How each request ended, by id, when asked.
    answers: Option<Vec<Option<Answer>>>,
    /// Busy time per instance id.
    busy: Vec<Nanos>,
    /// Instances holding a slot, and their cores: changes `(time, count, cores)`.
    slots: Vec<(Time, usize, u64)>,
    /// Sums and counts of the policy's gauges, sampled at its ticks after the warm-up.
    gauges: BTreeMap<String, (f64, usize)>,
    /// The per-stage gauges over time, at most one sample per interval.
    stage_series: Vec<(f64, String, f64)>,
    series_every: Nanos,
    next_stage_sample: Time,
    pub(crate) cold_starts: usize,
    pub(crate) warm_starts: usize,
    pub(crate) evictions: usize,
    utility: Option<UtilityAccount>,
    /// The last arrival or answer.
    last: Time,
    gaps: ArrivalGaps,
}

impl Recorder {
    /// `instances`: the initial ones (launched ones are added as they run); `interval`: the
    /// timeline's width.
    pub(crate) fn new(
        instances: usize,
        warmup: Time,
        slo: Option<Nanos>,
        interval: Nanos,
        per_request: bool,
        utility: Option<UtilityAccount>,
    ) -> Self {
        Self {
            warmup,
            slo,
            warming: Window::default(),
            measured: Window::default(),
            timeline: Timeline::new(interval),
            answers: per_request.then(Vec::new),
            busy: vec![0; instances],
            slots: Vec::new(),
            gauges: BTreeMap::new(),
            stage_series: Vec::new(),
            series_every: interval,
            next_stage_sample: Time::ZERO,
            cold_starts: 0,
            warm_starts: 0,
            evictions: 0,
            utility,
            last: Time::ZERO,
            gaps: ArrivalGaps::default(),
        }
    }

    fn window(&mut self, arrival: Time) -> &mut Window {
        if arrival < self.warmup { &mut self.warming } else { &mut self.measured }
    }

    pub(crate) fn arrived(&mut self, at: Time) {
        self.last = self.last.max(at);
        self.gaps.arrived(at);
        self.window(at).arrived();
        self.timeline.arrived(at);
    }

    /// Request `index` of the stream, `request`, ended with `outcome` at `now`; `ran`: the plan
    /// and end of the batch it ran in.
    pub(crate) fn answered(
        &mut self,
        index: usize,
        request: &SimRequest,
        outcome: &Outcome,
        now: Time,
        ran: Option<(TokenPlan, Time)>,
    ) {
        let latency = now - request.arrival;
        self.last = self.last.max(now);
        let slo = self.slo;
        self.window(request.arrival).answered(outcome, latency, slo);
        self.timeline.answered(request.arrival, outcome, latency, slo);
        if let Some(account) = &mut self.utility {
            account.answered(request, outcome, ran);
        }
        if let Some(answers) = &mut self.answers {
            if answers.len() <= index {
                answers.resize(index + 1, None);
            }
            answers[index] = Some(Answer { outcome: outcome.clone(), latency });
        }
    }

    /// A batch of requests with service classes starts under `plan` and ends at `end`.
    pub(crate) fn served(&mut self, plan: TokenPlan, end: Time, requests: &[&SimRequest]) {
        if let Some(account) = &mut self.utility {
            account.batch(plan, end, requests);
        }
    }

    pub(crate) fn busy(&mut self, instance: usize, span: Nanos) {
        if self.busy.len() <= instance {
            self.busy.resize(instance + 1, 0);
        }
        self.busy[instance] += span;
    }

    /// From `now` on, `count` instances hold a slot, with `cores` threads among them.
    pub(crate) fn slots(&mut self, now: Time, count: usize, cores: u64) {
        self.slots.push((now, count, cores));
    }

    pub(crate) fn queue(&mut self, now: Time, len: usize) {
        self.timeline.queue(now, len);
    }

    /// One sample of the policy's gauges at `now`, each keyed `name{label=value,…}`; the
    /// per-stage ones of [`STAGE_SERIES`] are also kept over time.
    pub(crate) fn gauges(&mut self, now: Time, gauges: Vec<Gauge>) {
        let series_due = now >= self.next_stage_sample;
        if series_due {
            self.next_stage_sample = now + self.series_every;
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

    /// The run's report, its policy named `policy` and its account of itself `policy_state`.
    /// The run spans its requests, from t = 0 to the last arrival or answer: ticks after the
    /// last answer change nothing.
    pub(crate) fn report(self, policy: String, policy_state: serde_json::Value) -> Report {
        let end = self.last;
        let warmup = self.warmup;
        let span_s = (end.0 as f64 / 1e9).max(f64::MIN_POSITIVE);
        let (mut instance_seconds, mut core_seconds) = (0.0, 0.0);
        for (k, (t, n, cores)) in self.slots.iter().enumerate() {
            let until = self.slots.get(k + 1).map_or(end, |s| s.0);
            let held = until.0.saturating_sub(t.0) as f64 / 1e9;
            instance_seconds += *n as f64 * held;
            core_seconds += *cores as f64 * held;
        }
        let instances_over_time = self.slots.iter().map(|(t, n, _)| (t.as_millis_f64() / 1e3, *n)).collect();
        let utilisation: Vec<f64> = self.busy.iter().map(|b| *b as f64 / 1e9 / span_s).collect();
        let measured_s = end.0.saturating_sub(warmup.0) as f64 / 1e9;
        let arrival_cv = self.gaps.cv();
        Report {
            policy,
            policy_state,
            measured: self.measured.report(measured_s),
            warmup: (warmup > Time::ZERO).then(|| self.warming.report(warmup.0.min(end.0) as f64 / 1e9)),
            latency_cdf: self.measured.latencies().cdf(CDF_POINTS),
            answers: self.answers.unwrap_or_default(),
            duration_s: span_s,
            arrival_cv,
            instance_seconds,
            core_seconds,
            mean_instances: instance_seconds / span_s,
            mean_utilisation: self.busy.iter().sum::<Nanos>() as f64
                / 1e9
                / instance_seconds.max(f64::MIN_POSITIVE),
            utilisation,
            instances_over_time,
            timeline: self.timeline.finish(),
            gauge_means: self.gauges.into_iter().map(|(k, (sum, n))| (k, sum / n as f64)).collect(),
            stage_series: self.stage_series,
            cold_starts: self.cold_starts,
            warm_starts: self.warm_starts,
            cache_evictions: self.evictions,
            utility: self.utility.map(UtilityAccount::report),
        }
    }
}

/// One policy's results: the measured window's figures (at its top level in JSON), the
/// warm-up's beside them, and the run from t = 0 by interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub policy: String,
    /// Requests that arrived at or after the warm-up (all of them without one).
    #[serde(flatten)]
    pub measured: WindowReport,
    /// Requests that arrived during the warm-up: served like the others, reported here.
    pub warmup: Option<WindowReport>,
    /// From time 0 to the last arrival or answer.
    pub duration_s: f64,
    /// The coefficient of variation of the stream's inter-arrival gaps (1: Poisson); NaN with
    /// fewer than three arrivals.
    pub arrival_cv: f64,
    /// Time-weighted instance count × duration (GPU-seconds for GPU instances).
    pub instance_seconds: f64,
    /// Time-weighted threads × duration: the cores the instances held.
    pub core_seconds: f64,
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
    /// The run from t = 0 in intervals ([`crate::SimOptions::interval`]).
    pub timeline: Vec<Interval>,
    /// The policy's gauges averaged over its ticks after the warm-up (per-stage queues,
    /// replicas, CVs, delays), keyed `name{label=value}`.
    pub gauge_means: BTreeMap<String, f64>,
    /// `(seconds, gauge{stage=k}, value)` of the per-stage gauges over time (queue, replicas,
    /// busy replicas, measured CV, observed delay), one sample per interval after the warm-up.
    #[serde(skip)]
    pub stage_series: Vec<(f64, String, f64)>,
    /// Launches that started from disk, and from parameters in host memory.
    pub cold_starts: usize,
    pub warm_starts: usize,
    /// Parameters dropped from host caches over their budget.
    pub cache_evictions: usize,
    /// The measured latencies' CDF, `(quantile, ms)`.
    #[serde(skip)]
    pub latency_cdf: Vec<(f64, f64)>,
    /// How each request ended, by index, with [`crate::SimOptions::per_request`] (else empty).
    #[serde(skip)]
    pub answers: Vec<Option<Answer>>,
    /// The policy's own account of itself at the end of the run ([`morph_core::Policy::describe`]).
    pub policy_state: serde_json::Value,
    /// OTAS's utility account, for a workload with query types.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub utility: Option<UtilityReport>,
}
