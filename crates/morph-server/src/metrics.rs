//! A small Prometheus registry: the counters, gauges and histograms Morph exports at `/metrics`.

use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use morph_core::{Gauge, StartKind};

/// Cumulative-bucket histogram with fixed upper bounds.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    state: Mutex<HistogramState>,
}

#[derive(Debug, Default)]
struct HistogramState {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

const SECONDS: &[f64] =
    &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];
const SIZES: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0];

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        let state = HistogramState { counts: vec![0; bounds.len()], ..Default::default() };
        Self { bounds, state: Mutex::new(state) }
    }

    pub fn observe(&self, value: f64) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let first = self.bounds.partition_point(|b| *b < value);
        s.counts[first..].iter_mut().for_each(|c| *c += 1);
        s.sum += value;
        s.count += 1;
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (bound, count) in self.bounds.iter().zip(&s.counts) {
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {count}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", s.count);
        let _ = writeln!(out, "{name}_sum {}\n{name}_count {}", s.sum, s.count);
    }
}

/// Why a request failed, as counted in `morph_request_failures_total{kind}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    Validation,
    BodyTooLarge,
    BodyTimeout,
    TooLong,
    Overloaded,
    UnknownModel,
    UnknownTask,
    Unauthorized,
    Deadline,
    WrongEndpoint,
    Engine,
    ShuttingDown,
}

impl FailureKind {
    const ALL: [FailureKind; 12] = [
        FailureKind::Validation,
        FailureKind::BodyTooLarge,
        FailureKind::BodyTimeout,
        FailureKind::TooLong,
        FailureKind::Overloaded,
        FailureKind::UnknownModel,
        FailureKind::UnknownTask,
        FailureKind::Unauthorized,
        FailureKind::Deadline,
        FailureKind::WrongEndpoint,
        FailureKind::Engine,
        FailureKind::ShuttingDown,
    ];

    pub fn label(self) -> &'static str {
        match self {
            FailureKind::Validation => "validation",
            FailureKind::BodyTooLarge => "body_too_large",
            FailureKind::BodyTimeout => "body_timeout",
            FailureKind::TooLong => "too_long",
            FailureKind::Overloaded => "overloaded",
            FailureKind::UnknownModel => "unknown_model",
            FailureKind::UnknownTask => "unknown_task",
            FailureKind::Unauthorized => "unauthorized",
            FailureKind::Deadline => "deadline",
            FailureKind::WrongEndpoint => "wrong_endpoint",
            FailureKind::ShuttingDown => "shutting_down",
            FailureKind::Engine => "engine",
        }
    }
}

/// Where a cancelled request was, as counted in `morph_cancellations_total{kind}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelKind {
    /// Waiting: it left the queue.
    Queued,
    /// A running generation: stopped at its next iteration.
    Stopped,
    /// In a running encoder batch: computed, then discarded.
    Discarded,
}

impl CancelKind {
    const ALL: [CancelKind; 3] = [CancelKind::Queued, CancelKind::Stopped, CancelKind::Discarded];

    pub fn label(self) -> &'static str {
        match self {
            CancelKind::Queued => "queued",
            CancelKind::Stopped => "stopped",
            CancelKind::Discarded => "discarded",
        }
    }
}

#[derive(Debug)]
pub struct Metrics {
    pub requests: AtomicU64,
    failures: [AtomicU64; FailureKind::ALL.len()],
    cancellations: [AtomicU64; CancelKind::ALL.len()],
    /// Policy actions the ledger refused (policy bugs).
    refused: AtomicU64,
    /// Generation: tokens the decoders sampled (for every generation, its caller there or not).
    pub generated_tokens: AtomicU64,
    /// Generation: prompt tokens of answered generations, and those a kept cache held.
    pub prompt_tokens: AtomicU64,
    pub cached_prompt_tokens: AtomicU64,
    pub queue_size: AtomicI64,
    pub batch_size: Histogram,
    pub batch_padded_tokens: Histogram,
    pub input_length: Histogram,
    pub tokenization_seconds: Histogram,
    pub queue_seconds: Histogram,
    pub inference_seconds: Histogram,
    pub request_seconds: Histogram,
    /// Generation: time to the first token, and per output token after it.
    pub time_to_first_token_seconds: Histogram,
    pub time_per_output_token_seconds: Histogram,
    /// Generation: how long a prompt waited for its predicted output length (SSJF).
    pub prediction_seconds: Histogram,
    pub prediction_cache_hits: AtomicU64,
    /// Launches come up, by start kind (cold, warm, hot), and their summed time in ns.
    starts: [AtomicU64; 3],
    start_nanos: [AtomicU64; 3],
    /// Worker processes that crashed or were declared dead.
    pub workers_lost: AtomicU64,
    /// Decoder iterations by (sequences computed, whether a prompt chunk was fed): the serving
    /// path's K(b) and prefill as a simulator prices them.
    decode_iterations: Mutex<std::collections::BTreeMap<(usize, bool), IterationSums>>,
}

/// One kind of decoder iteration, summed.
#[derive(Debug, Clone, Copy, Default)]
struct IterationSums {
    seconds: f64,
    count: u64,
    /// Tokens in the computed sequences' caches after each iteration.
    context: u64,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            requests: AtomicU64::new(0),
            failures: Default::default(),
            cancellations: Default::default(),
            refused: AtomicU64::new(0),
            generated_tokens: AtomicU64::new(0),
            prompt_tokens: AtomicU64::new(0),
            cached_prompt_tokens: AtomicU64::new(0),
            queue_size: AtomicI64::new(0),
            batch_size: Histogram::new(SIZES),
            batch_padded_tokens: Histogram::new(&[
                64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0,
            ]),
            input_length: Histogram::new(SIZES),
            tokenization_seconds: Histogram::new(SECONDS),
            queue_seconds: Histogram::new(SECONDS),
            inference_seconds: Histogram::new(SECONDS),
            request_seconds: Histogram::new(SECONDS),
            time_to_first_token_seconds: Histogram::new(SECONDS),
            time_per_output_token_seconds: Histogram::new(SECONDS),
            prediction_seconds: Histogram::new(SECONDS),
            prediction_cache_hits: AtomicU64::new(0),
            starts: Default::default(),
            start_nanos: Default::default(),
            workers_lost: AtomicU64::new(0),
            decode_iterations: Mutex::default(),
        }
    }
}

impl Metrics {
    /// A decoder iteration of `sequences` generations took `seconds`, their caches holding
    /// `context` tokens after it.
    pub fn decode_iteration(&self, sequences: usize, prefilling: bool, seconds: f64, context: usize) {
        if let Ok(mut m) = self.decode_iterations.lock() {
            let entry = m.entry((sequences, prefilling)).or_default();
            entry.seconds += seconds;
            entry.count += 1;
            entry.context += context as u64;
        }
    }

    pub fn fail(&self, kind: FailureKind) {
        self.failures[kind as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn failures(&self, kind: FailureKind) -> u64 {
        self.failures[kind as usize].load(Ordering::Relaxed)
    }

    pub fn cancelled(&self, kind: CancelKind) {
        self.cancellations[kind as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn cancellations(&self, kind: CancelKind) -> u64 {
        self.cancellations[kind as usize].load(Ordering::Relaxed)
    }

    pub fn refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// A launch came up after `took`, started `kind`.
    pub fn started(&self, kind: StartKind, took: std::time::Duration) {
        self.starts[kind as usize].fetch_add(1, Ordering::Relaxed);
        self.start_nanos[kind as usize].fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
    }

    pub fn set_queue_size(&self, len: usize) {
        self.queue_size.store(len as i64, Ordering::Relaxed);
    }

    /// The Prometheus text exposition of every metric; `instances` are `(runtime, count)`,
    /// `policy` the policy's own gauges (untyped, as `morph_policy_<name>{labels}`).
    pub fn render(&self, instances: &[(String, usize)], policy: &[Gauge]) -> String {
        let mut out = String::new();
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64;
        let one = |value: f64| [(String::new(), value)];
        let by_kind = |label: &str| format!("kind=\"{label}\"");
        family(
            &mut out,
            "morph_requests_total",
            "counter",
            "HTTP embedding and generation calls received.",
            one(load(&self.requests)),
        );
        let failures = FailureKind::ALL.iter().map(|k| (by_kind(k.label()), self.failures(*k) as f64));
        family(&mut out, "morph_request_failures_total", "counter", "Failed calls by kind.", failures);
        let queued = self.queue_size.load(Ordering::Relaxed) as f64;
        family(
            &mut out,
            "morph_queue_size",
            "gauge",
            "Sequences admitted and waiting for an instance.",
            one(queued),
        );
        let counts = instances.iter().map(|(runtime, n)| (format!("runtime=\"{runtime}\""), *n as f64));
        family(&mut out, "morph_instances", "gauge", "Instances per unit (runtime, stage, threads).", counts);
        let cancelled = CancelKind::ALL.iter().map(|k| (by_kind(k.label()), self.cancellations(*k) as f64));
        let help = "Requests whose client went away, by where they were.";
        family(&mut out, "morph_cancellations_total", "counter", help, cancelled);
        let help = "Policy actions refused for breaking a ledger rule.";
        family(&mut out, "morph_policy_refusals_total", "counter", help, one(load(&self.refused)));
        let help = "Tokens the decoders sampled.";
        family(&mut out, "morph_generated_tokens_total", "counter", help, one(load(&self.generated_tokens)));
        let help = "Prompt tokens of answered generations.";
        family(&mut out, "morph_prompt_tokens_total", "counter", help, one(load(&self.prompt_tokens)));
        let help = "Of those, prompt tokens a closed sequence's kept KV cache held (not computed again).";
        family(
            &mut out,
            "morph_prompt_tokens_cached_total",
            "counter",
            help,
            one(load(&self.cached_prompt_tokens)),
        );
        for gauge in policy {
            let _ = writeln!(out, "{} {}", series(gauge), gauge.value);
        }
        self.batch_size.render(&mut out, "morph_batch_size", "Sequences per batch.");
        self.batch_padded_tokens.render(
            &mut out,
            "morph_batch_padded_tokens",
            "Tokens per batch after padding.",
        );
        self.input_length.render(&mut out, "morph_request_input_length", "Tokens per input sequence.");
        self.tokenization_seconds.render(
            &mut out,
            "morph_tokenization_seconds",
            "Time spent tokenizing a call.",
        );
        self.queue_seconds.render(
            &mut out,
            "morph_queue_seconds",
            "Time a sequence waited before its batch started.",
        );
        self.inference_seconds.render(
            &mut out,
            "morph_inference_seconds",
            "Time a batch spent in the engine.",
        );
        self.request_seconds.render(
            &mut out,
            "morph_request_seconds",
            "End-to-end time of a successful call.",
        );
        self.time_to_first_token_seconds.render(
            &mut out,
            "morph_time_to_first_token_seconds",
            "Generation: from arrival to the first output token.",
        );
        self.time_per_output_token_seconds.render(
            &mut out,
            "morph_time_per_output_token_seconds",
            "Generation: mean time per output token after the first.",
        );
        self.prediction_seconds.render(
            &mut out,
            "morph_prediction_seconds",
            "Generation: time a prompt waited for its predicted output length.",
        );
        let kinds = [StartKind::Cold, StartKind::Warm, StartKind::Hot];
        let starts = kinds.iter().map(|k| (by_kind(k.label()), load(&self.starts[*k as usize])));
        let help = "Launched instances come up, by start kind.";
        family(&mut out, "morph_instance_starts_total", "counter", help, starts);
        let took = kinds.iter().map(|k| (by_kind(k.label()), load(&self.start_nanos[*k as usize]) / 1e9));
        let help = "Time from launch to up, summed, by start kind.";
        family(&mut out, "morph_instance_start_seconds_total", "counter", help, took);
        let help = "Worker processes that crashed or were declared dead.";
        family(&mut out, "morph_workers_lost_total", "counter", help, one(load(&self.workers_lost)));
        let iterations = self.decode_iterations.lock().map(|m| m.clone()).unwrap_or_default();
        let label =
            |(sequences, prefill): (usize, bool)| format!("sequences=\"{sequences}\",prefill=\"{prefill}\"");
        let help =
            "Decoder iterations: summed wall time by sequences computed and whether a prompt chunk was fed.";
        let sums = iterations.iter().map(|(k, s)| (label(*k), s.seconds));
        family(&mut out, "morph_decode_iteration_seconds_sum", "counter", help, sums);
        let help = "Decoder iterations by sequences computed and whether a prompt chunk was fed.";
        let counts = iterations.iter().map(|(k, s)| (label(*k), s.count as f64));
        family(&mut out, "morph_decode_iteration_seconds_count", "counter", help, counts);
        let help = "Decoder iterations: tokens in the computed sequences' KV caches after each, summed.";
        let context = iterations.iter().map(|(k, s)| (label(*k), s.context as f64));
        family(&mut out, "morph_decode_iteration_context_tokens_total", "counter", help, context);
        let help = "Predictions answered from the length cache.";
        family(
            &mut out,
            "morph_prediction_cache_hits_total",
            "counter",
            help,
            one(load(&self.prediction_cache_hits)),
        );
        out
    }
}

/// The cluster's hosts as gauges labelled `host`: registered (1) or not, slots for the policy,
/// worker processes registered.
pub fn render_cluster(hosts: &[crate::cluster::hosts::HostState]) -> String {
    let mut out = String::new();
    let label = |h: &crate::cluster::hosts::HostState| format!("host=\"{}\"", h.name);
    let up = hosts.iter().map(|h| (label(h), f64::from(u8::from(h.record.is_some()))));
    family(&mut out, "morph_cluster_host_up", "gauge", "1 while the host's agent is registered in etcd.", up);
    let slots = hosts.iter().map(|h| (label(h), f64::from(h.slots)));
    family(
        &mut out,
        "morph_cluster_host_slots",
        "gauge",
        "Device slots the policy may use on the host.",
        slots,
    );
    let workers = hosts.iter().map(|h| (label(h), h.workers as f64));
    family(
        &mut out,
        "morph_cluster_host_workers",
        "gauge",
        "Worker processes registered on the host.",
        workers,
    );
    out
}

/// One metric family: its HELP and TYPE lines, then each series `name{labels} value` (no
/// braces when `labels` is empty).
fn family(
    out: &mut String,
    name: &str,
    kind: &str,
    help: &str,
    series: impl IntoIterator<Item = (String, f64)>,
) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    for (labels, value) in series {
        match labels.is_empty() {
            true => writeln!(out, "{name} {value}"),
            false => writeln!(out, "{name}{{{labels}}} {value}"),
        }
        .unwrap_or_default();
    }
}

/// `morph_policy_<name>{key="value",...}`.
fn series(gauge: &Gauge) -> String {
    let mut out = format!("morph_policy_{}", gauge.name);
    if !gauge.labels.is_empty() {
        let labels: Vec<String> = gauge.labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
        out.push('{');
        out.push_str(&labels.join(","));
        out.push('}');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_gauges_are_prefixed_and_labelled() {
        let g = Gauge::new("instances", 3.0).label("runtime", "fixed:64x1");
        assert_eq!(series(&g), "morph_policy_instances{runtime=\"fixed:64x1\"}");
        assert_eq!(series(&Gauge::new("allocations_total", 1.0)), "morph_policy_allocations_total");
    }

    #[test]
    fn histogram_buckets_are_cumulative() {
        let h = Histogram::new(&[1.0, 2.0]);
        h.observe(0.5);
        h.observe(1.5);
        h.observe(3.0);
        let mut out = String::new();
        h.render(&mut out, "x", "help");
        assert!(out.contains("x_bucket{le=\"1\"} 1\n"));
        assert!(out.contains("x_bucket{le=\"2\"} 2\n"));
        assert!(out.contains("x_bucket{le=\"+Inf\"} 3\n"));
        assert!(out.contains("x_sum 5\nx_count 3\n"));
    }

    #[test]
    fn decode_iterations_sum_by_sequences_and_prefill() {
        let m = Metrics::default();
        m.decode_iteration(2, false, 0.5, 300);
        m.decode_iteration(2, false, 0.25, 302);
        m.decode_iteration(1, true, 0.125, 64);
        let out = m.render(&[], &[]);
        let labels = "{sequences=\"2\",prefill=\"false\"}";
        assert!(out.contains(&format!("morph_decode_iteration_seconds_sum{labels} 0.75\n")), "{out}");
        assert!(out.contains(&format!("morph_decode_iteration_seconds_count{labels} 2\n")), "{out}");
        assert!(out.contains("morph_decode_iteration_seconds_count{sequences=\"1\",prefill=\"true\"} 1\n"));
        assert!(out.contains(&format!("morph_decode_iteration_context_tokens_total{labels} 602\n")), "{out}");
    }
}
