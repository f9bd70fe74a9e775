//! What Morph exports at `/metrics`, recorded with the `metrics` crate into this server's own
//! Prometheus recorder (`metrics-exporter-prometheus`, as TEI does; one per server, so that
//! servers in one process keep their counts apart), with the process's own `process_*` series
//! (`metrics-process`). A family appears once the server records into it: an embedding server
//! exports no generation families, and the other way round.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use metrics::{
    Counter, Gauge as GaugeHandle, Histogram, Key, KeyName, Label, Metadata, Recorder, SharedString, Unit,
};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusRecorder};
use morph_core::{Gauge, StartKind};

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
    Starting,
    NotFound,
    MethodNotAllowed,
}

impl FailureKind {
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
            FailureKind::Engine => "engine",
            FailureKind::ShuttingDown => "shutting_down",
            FailureKind::Starting => "starting",
            FailureKind::NotFound => "not_found",
            FailureKind::MethodNotAllowed => "method_not_allowed",
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
    pub fn label(self) -> &'static str {
        match self {
            CancelKind::Queued => "queued",
            CancelKind::Stopped => "stopped",
            CancelKind::Discarded => "discarded",
        }
    }
}

/// Bucket bounds of durations: from half a millisecond to a long generation's five minutes.
const SECONDS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
    300.0,
];
/// Bucket bounds of counts (sequences, tokens).
const SIZES: &[f64] =
    &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0];
const PADDED_TOKENS: &[f64] = &[64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0, 32768.0];

/// Every family: its name, kind, unit and help (the `# HELP` line).
const FAMILIES: &[(&str, Kind, Option<Unit>, &str)] = &[
    (
        "morph_requests_total",
        Kind::Counter,
        None,
        "HTTP calls, by route and status (499: the client left before the answer).",
    ),
    (
        "morph_request_duration_seconds",
        Kind::Histogram,
        Some(Unit::Seconds),
        "End-to-end time of a call, by route and status (failures too).",
    ),
    ("morph_request_failures_total", Kind::Counter, None, "Failed calls by kind."),
    ("morph_queue_sequences", Kind::Gauge, None, "Sequences admitted and waiting for an instance."),
    ("morph_instances", Kind::Gauge, None, "Instances per unit (runtime, stage, threads)."),
    (
        "morph_cancellations_total",
        Kind::Counter,
        None,
        "Requests whose client went away, by where they were.",
    ),
    (
        "morph_policy_refusals_total",
        Kind::Counter,
        None,
        "Policy actions refused for breaking a ledger rule.",
    ),
    ("morph_generated_tokens_total", Kind::Counter, None, "Tokens the decoders sampled."),
    ("morph_prompt_tokens_total", Kind::Counter, None, "Prompt tokens of answered generations."),
    (
        "morph_prompt_tokens_cached_total",
        Kind::Counter,
        None,
        "Of those, prompt tokens a kept KV cache held (a closed sequence's, or the prompt cache's).",
    ),
    (
        "morph_prompt_cache_hits_total",
        Kind::Counter,
        None,
        "Prompt cache: prompts given a kept state from host memory.",
    ),
    (
        "morph_prompt_cache_misses_total",
        Kind::Counter,
        None,
        "Prompt cache: prompts it had nothing more for.",
    ),
    (
        "morph_prompt_cache_reused_tokens_total",
        Kind::Counter,
        None,
        "Prompt cache: prompt tokens its restored states held.",
    ),
    (
        "morph_prompt_cache_evictions_total",
        Kind::Counter,
        None,
        "Prompt cache: states dropped to stay within --prompt-cache-mib.",
    ),
    ("morph_prompt_cache_entries", Kind::Gauge, None, "Prompt cache: states kept."),
    (
        "morph_prompt_cache_bytes",
        Kind::Gauge,
        Some(Unit::Bytes),
        "Prompt cache: host memory its states take.",
    ),
    (
        "morph_prompt_cache_capacity_bytes",
        Kind::Gauge,
        Some(Unit::Bytes),
        "Prompt cache: its bound (--prompt-cache-mib).",
    ),
    ("morph_batch_sequences", Kind::Histogram, None, "Sequences per batch."),
    ("morph_batch_padded_tokens", Kind::Histogram, None, "Tokens per batch after padding."),
    ("morph_request_input_tokens", Kind::Histogram, None, "Tokens per input sequence."),
    ("morph_tokenization_seconds", Kind::Histogram, Some(Unit::Seconds), "Time spent tokenizing a call."),
    (
        "morph_queue_seconds",
        Kind::Histogram,
        Some(Unit::Seconds),
        "Time a sequence waited before its batch started.",
    ),
    ("morph_inference_seconds", Kind::Histogram, Some(Unit::Seconds), "Time a batch spent in the engine."),
    (
        "morph_time_to_first_token_seconds",
        Kind::Histogram,
        Some(Unit::Seconds),
        "Generation: from arrival to the first output token.",
    ),
    (
        "morph_time_per_output_token_seconds",
        Kind::Histogram,
        Some(Unit::Seconds),
        "Generation: mean time per output token after the first.",
    ),
    (
        "morph_prediction_seconds",
        Kind::Histogram,
        Some(Unit::Seconds),
        "Generation: time a prompt waited for its predicted output length.",
    ),
    ("morph_prediction_cache_hits_total", Kind::Counter, None, "Predictions answered from the length cache."),
    ("morph_instance_starts_total", Kind::Counter, None, "Launched instances come up, by start kind."),
    (
        "morph_instance_start_seconds",
        Kind::Histogram,
        Some(Unit::Seconds),
        "Time from launch to up, by start kind.",
    ),
    (
        "morph_workers_lost_total",
        Kind::Counter,
        None,
        "Worker processes that crashed, exited or were declared dead.",
    ),
    (
        "morph_decode_iteration_seconds",
        Kind::Histogram,
        Some(Unit::Seconds),
        "Decoder iterations: wall time by sequences computed and whether a prompt chunk was fed.",
    ),
    (
        "morph_decode_iteration_context_tokens_total",
        Kind::Counter,
        None,
        "Decoder iterations: tokens in the computed sequences' KV caches after each, summed.",
    ),
    ("morph_host_cores", Kind::Gauge, None, "Several-model server: the host's cores its models share."),
    (
        "morph_model_threads",
        Kind::Gauge,
        None,
        "Several-model server: cores each model's computations held, averaged over the core controller's last period (250 ms).",
    ),
    (
        "morph_model_core_pressure",
        Kind::Gauge,
        None,
        "Several-model server: the share of its SLO each model's backlog takes to drain on every core.",
    ),
    (
        "morph_model_core_slack_seconds",
        Kind::Gauge,
        Some(Unit::Seconds),
        "Several-model server: how long a model's computations may wait for cores before a more relaxed model's go first (shortest for the critical model).",
    ),
    (
        "morph_core_moves_total",
        Kind::Counter,
        None,
        "Several-model server: changes of the critical model, by the model now critical (none: no model) and why.",
    ),
    ("morph_cluster_host_up", Kind::Gauge, None, "1 while the host's agent is registered in etcd."),
    ("morph_cluster_host_slots", Kind::Gauge, None, "Device slots the policy may use on the host."),
    ("morph_cluster_host_workers", Kind::Gauge, None, "Worker processes registered on the host."),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// The bounds of each histogram family.
fn buckets(name: &str) -> &'static [f64] {
    match name {
        "morph_batch_padded_tokens" => PADDED_TOKENS,
        "morph_batch_sequences" | "morph_request_input_tokens" => SIZES,
        _ => SECONDS,
    }
}

/// Labels of one series, by name.
type Labels = Vec<(String, String)>;

pub struct Metrics {
    recorder: PrometheusRecorder,
    process: metrics_process::Collector,
    /// Series set at each scrape from the state then (instances, policy gauges, hosts): those
    /// seen before and absent now are set to 0 rather than left at a stale value.
    snapshot: Mutex<BTreeSet<(String, Labels)>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        let mut builder = PrometheusBuilder::new();
        for (name, kind, _, _) in FAMILIES {
            if *kind == Kind::Histogram {
                builder = builder
                    .set_buckets_for_metric(Matcher::Full((*name).to_string()), buckets(name))
                    .unwrap_or_else(|e| unreachable!("the bucket lists are not empty: {e}"));
            }
        }
        let recorder = builder.build_recorder();
        for (name, kind, unit, help) in FAMILIES {
            let (key, help) = (KeyName::from(*name), SharedString::from(*help));
            match kind {
                Kind::Counter => recorder.describe_counter(key, *unit, help),
                Kind::Gauge => recorder.describe_gauge(key, *unit, help),
                Kind::Histogram => recorder.describe_histogram(key, *unit, help),
            }
        }
        let process = metrics_process::Collector::default();
        metrics::with_local_recorder(&recorder, || process.describe());
        Self { recorder, process, snapshot: Mutex::default() }
    }
}

static METADATA: Metadata<'static> =
    Metadata::new(module_path!(), metrics::Level::INFO, Some(module_path!()));

/// A series' key; a `&'static str` name is kept without a copy (the families' names are).
fn key(name: impl Into<KeyName>, labels: Labels) -> Key {
    let labels: Vec<Label> = labels.into_iter().map(|(k, v)| Label::new(k, v)).collect();
    Key::from_parts(name, labels)
}

/// One label.
fn label(name: &str, value: impl ToString) -> Labels {
    vec![(name.to_string(), value.to_string())]
}

impl Metrics {
    fn counter(&self, name: &'static str, labels: Labels) -> Counter {
        self.recorder.register_counter(&key(name, labels), &METADATA)
    }

    fn histogram(&self, name: &'static str, labels: Labels) -> Histogram {
        self.recorder.register_histogram(&key(name, labels), &METADATA)
    }

    fn gauge(&self, name: impl Into<KeyName>, labels: Labels) -> GaugeHandle {
        self.recorder.register_gauge(&key(name, labels), &METADATA)
    }

    /// A call to `route` answered `status` after `seconds`.
    pub fn call(&self, route: &str, status: u16, seconds: f64) {
        let labels = [label("route", route), label("status", status)].concat();
        self.counter("morph_requests_total", labels.clone()).increment(1);
        self.histogram("morph_request_duration_seconds", labels).record(seconds);
    }

    pub fn fail(&self, kind: FailureKind) {
        self.counter("morph_request_failures_total", label("kind", kind.label())).increment(1);
    }

    pub fn cancelled(&self, kind: CancelKind) {
        self.counter("morph_cancellations_total", label("kind", kind.label())).increment(1);
    }

    pub fn refused(&self) {
        self.counter("morph_policy_refusals_total", Vec::new()).increment(1);
    }

    /// A launch came up after `took`, started `kind`.
    pub fn started(&self, kind: StartKind, took: Duration) {
        let labels = label("kind", kind.label());
        self.counter("morph_instance_starts_total", labels.clone()).increment(1);
        self.histogram("morph_instance_start_seconds", labels).record(took.as_secs_f64());
    }

    pub fn worker_lost(&self) {
        self.counter("morph_workers_lost_total", Vec::new()).increment(1);
    }

    pub fn set_queue_size(&self, len: usize) {
        self.gauge("morph_queue_sequences", Vec::new()).set(len as f64);
    }

    pub fn queued(&self, seconds: f64) {
        self.histogram("morph_queue_seconds", Vec::new()).record(seconds);
    }

    /// An encoder batch of `sequences` and `padded_tokens` spent `seconds` in the engine.
    pub fn batch(&self, sequences: usize, padded_tokens: u64, seconds: f64) {
        self.histogram("morph_batch_sequences", Vec::new()).record(sequences as f64);
        self.histogram("morph_batch_padded_tokens", Vec::new()).record(padded_tokens as f64);
        self.histogram("morph_inference_seconds", Vec::new()).record(seconds);
    }

    pub fn input_tokens(&self, tokens: usize) {
        self.histogram("morph_request_input_tokens", Vec::new()).record(tokens as f64);
    }

    pub fn tokenization(&self, seconds: f64) {
        self.histogram("morph_tokenization_seconds", Vec::new()).record(seconds);
    }

    pub fn generated_tokens(&self, tokens: usize) {
        self.counter("morph_generated_tokens_total", Vec::new()).increment(tokens as u64);
    }

    /// An answered generation's prompt tokens, and of those the ones a kept cache held.
    pub fn prompt_tokens(&self, prompt: usize, cached: usize) {
        self.counter("morph_prompt_tokens_total", Vec::new()).increment(prompt as u64);
        self.counter("morph_prompt_tokens_cached_total", Vec::new()).increment(cached as u64);
    }

    pub fn time_to_first_token(&self, seconds: f64) {
        self.histogram("morph_time_to_first_token_seconds", Vec::new()).record(seconds);
    }

    pub fn time_per_output_token(&self, seconds: f64) {
        self.histogram("morph_time_per_output_token_seconds", Vec::new()).record(seconds);
    }

    pub fn prediction(&self, seconds: f64) {
        self.histogram("morph_prediction_seconds", Vec::new()).record(seconds);
    }

    pub fn prediction_cache_hit(&self) {
        self.counter("morph_prediction_cache_hits_total", Vec::new()).increment(1);
    }

    /// The decoder's prompt cache as it is now (its counters are its own, set absolute).
    pub fn prompt_cache(&self, stats: &morph_decoder::CacheStats) {
        let counters = [
            ("morph_prompt_cache_hits_total", stats.hits),
            ("morph_prompt_cache_misses_total", stats.misses),
            ("morph_prompt_cache_reused_tokens_total", stats.tokens_reused),
            ("morph_prompt_cache_evictions_total", stats.evictions),
        ];
        for (name, value) in counters {
            self.counter(name, Vec::new()).absolute(value);
        }
        self.gauge("morph_prompt_cache_entries", Vec::new()).set(stats.entries as f64);
        self.gauge("morph_prompt_cache_bytes", Vec::new()).set(stats.bytes as f64);
        self.gauge("morph_prompt_cache_capacity_bytes", Vec::new()).set(stats.capacity as f64);
    }

    /// A decoder iteration of `sequences` generations took `seconds`, their caches holding
    /// `context` tokens after it.
    pub fn decode_iteration(&self, sequences: usize, prefilling: bool, seconds: f64, context: usize) {
        let labels = [label("sequences", sequences), label("prefill", prefilling)].concat();
        self.histogram("morph_decode_iteration_seconds", labels.clone()).record(seconds);
        self.counter("morph_decode_iteration_context_tokens_total", labels).increment(context as u64);
    }

    /// A several-model server's core budget.
    pub fn host_cores(&self, cores: u16) {
        self.gauge("morph_host_cores", Vec::new()).set(f64::from(cores));
    }

    /// A model's cores over the core controller's last period, and its slack and pressure now.
    pub fn model_cores(&self, model: &str, threads: f64, slack: Duration, pressure: f64) {
        let labels = || label("model", model);
        self.gauge("morph_model_threads", labels()).set(threads);
        self.gauge("morph_model_core_slack_seconds", labels()).set(slack.as_secs_f64());
        self.gauge("morph_model_core_pressure", labels()).set(pressure);
    }

    /// The critical model changed to `model` (or `none`) for `reason`.
    pub fn core_move(&self, model: &str, reason: &str) {
        let labels = [label("model", model), label("reason", reason)].concat();
        self.counter("morph_core_moves_total", labels).increment(1);
    }

    /// The Prometheus text exposition: what was recorded, the process's series, and the state
    /// now of `instances` (`(unit, count)`), the policy's own gauges (as
    /// `morph_policy_<name>{labels}`; a name ending in `_total` is a counter) and the cluster's
    /// `hosts`.
    pub fn render(&self, instances: &[(String, usize)], policy: &[Gauge], hosts: &[HostGauges]) -> String {
        metrics::with_local_recorder(&self.recorder, || self.process.collect());
        let mut now: Vec<(String, Labels, f64)> = Vec::new();
        for (runtime, n) in instances {
            now.push(("morph_instances".into(), label("runtime", runtime), *n as f64));
        }
        for h in hosts {
            let host = || label("host", &h.name);
            now.push(("morph_cluster_host_up".into(), host(), f64::from(u8::from(h.up))));
            now.push(("morph_cluster_host_slots".into(), host(), f64::from(h.slots)));
            now.push(("morph_cluster_host_workers".into(), host(), h.workers as f64));
        }
        for g in policy {
            let name = format!("morph_policy_{}", g.name);
            let labels: Labels = g.labels.clone();
            let help = SharedString::from(g.help);
            match name.ends_with("_total") {
                true => {
                    self.recorder.describe_counter(KeyName::from(name.clone()), None, help);
                    self.recorder.register_counter(&key(name, labels), &METADATA).absolute(g.value as u64)
                }
                false => {
                    self.recorder.describe_gauge(KeyName::from(name.clone()), None, help);
                    now.push((name, labels, g.value));
                }
            }
        }
        self.set_snapshot(now);
        self.recorder.handle().render()
    }

    /// Sets the scrape-time gauges to `now`, and those seen before but absent now to 0.
    fn set_snapshot(&self, now: Vec<(String, Labels, f64)>) {
        let mut seen = self.snapshot.lock().unwrap_or_else(|e| e.into_inner());
        let current: BTreeSet<(String, Labels)> =
            now.iter().map(|(n, l, _)| (n.clone(), l.clone())).collect();
        for (name, labels) in seen.difference(&current) {
            self.gauge(name.clone(), labels.clone()).set(0.0);
        }
        for (name, labels, value) in now {
            self.gauge(name, labels).set(value);
        }
        seen.extend(current);
    }
}

/// One cluster host as its gauges show it.
#[derive(Debug, Clone)]
pub struct HostGauges {
    pub name: String,
    /// Its agent is registered in etcd.
    pub up: bool,
    pub slots: u16,
    pub workers: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_gauges_are_prefixed_labelled_and_counters_by_their_suffix() {
        let m = Metrics::default();
        let gauges = [
            Gauge::new("instances", "Instances up.", 3.0).label("runtime", "fixed:64x1"),
            Gauge::new("allocations_total", "Allocator runs.", 2.0),
        ];
        let out = m.render(&[], &gauges, &[]);
        assert!(out.contains("morph_policy_instances{runtime=\"fixed:64x1\"} 3\n"), "{out}");
        assert!(out.contains("# HELP morph_policy_instances Instances up.\n"), "{out}");
        assert!(
            out.contains("# HELP morph_policy_allocations_total Allocator runs.\n# TYPE morph_policy_allocations_total counter\nmorph_policy_allocations_total 2\n"),
            "{out}"
        );
        // A series gone since the last scrape reads 0, not its last value.
        let out = m.render(&[], &[], &[]);
        assert!(out.contains("morph_policy_instances{runtime=\"fixed:64x1\"} 0\n"), "{out}");
    }

    #[test]
    fn decode_iterations_are_a_histogram_by_sequences_and_prefill() {
        let m = Metrics::default();
        m.decode_iteration(2, false, 0.5, 300);
        m.decode_iteration(2, false, 0.25, 302);
        m.decode_iteration(1, true, 0.125, 64);
        let out = m.render(&[], &[], &[]);
        let labels = "sequences=\"2\",prefill=\"false\"";
        assert!(out.contains(&format!("morph_decode_iteration_seconds_sum{{{labels}}} 0.75\n")), "{out}");
        assert!(out.contains(&format!("morph_decode_iteration_seconds_count{{{labels}}} 2\n")), "{out}");
        assert!(
            out.contains(&format!("morph_decode_iteration_seconds_bucket{{{labels},le=\"0.5\"}} 2\n")),
            "{out}"
        );
        assert!(out.contains("morph_decode_iteration_seconds_count{sequences=\"1\",prefill=\"true\"} 1\n"));
        assert!(
            out.contains(&format!("morph_decode_iteration_context_tokens_total{{{labels}}} 602\n")),
            "{out}"
        );
    }

    #[test]
    fn only_the_families_recorded_into_appear_and_the_process_is_there() {
        let m = Metrics::default();
        m.call("/v1/embeddings", 200, 0.01);
        let out = m.render(&[], &[], &[]);
        assert!(out.contains("morph_requests_total{route=\"/v1/embeddings\",status=\"200\"} 1\n"), "{out}");
        assert!(!out.contains("morph_time_to_first_token_seconds"), "{out}");
        assert!(out.contains("process_resident_memory_bytes"), "{out}");
    }
}
