//! A scenario file's contents as typed values (serde reads the TOML into them).

use std::collections::BTreeMap;
use std::path::PathBuf;

use morph_core::{RuntimeSpec, StageTime, StageTimes};
use serde::{Deserialize, Serialize};

use crate::metrics::Report;
use crate::workload::{Predictor, Workload, WorkloadError};

#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("cannot read scenario {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("scenario {path}: {message}")]
    Parse { path: String, message: String },
    #[error("scenario: {0}")]
    Invalid(String),
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    #[error(transparent)]
    LatencyProfile(#[from] morph_core::ProfileError),
    #[error(transparent)]
    Policy(#[from] morph_policy::registry::PolicyError),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeGroup {
    pub runtime: String,
    pub instances: usize,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cluster {
    /// A latency profile (encoders); or `generation` instead.
    pub profile: Option<PathBuf>,
    /// Profiles of pipeline stages or token plans (keyed by their `stage` and `plan`), pricing
    /// those batches instead of `profile`.
    #[serde(default)]
    pub variants: Vec<PathBuf>,
    /// SSJF's linear generation cost.
    pub generation: Option<GenerationCost>,
    #[serde(default = "one")]
    pub dynamic_penalty: f64,
    /// Device slots for policies that choose their own runtimes; default: Σ runtimes' instances.
    pub instances: Option<usize>,
    #[serde(default)]
    pub runtimes: Vec<RuntimeGroup>,
    #[serde(default = "thousand")]
    pub startup_ms: f64,
    pub warm_startup_ms: Option<f64>,
    /// A model cut into stages (QUART), priced by its stage times instead of a profile.
    pub pipeline: Option<PipelineSpec>,
    /// Hosts (QUART's servers) with device slots and memory; default: one host with every slot.
    /// `servers`, its earlier name, is read too.
    #[serde(alias = "servers")]
    pub hosts: Option<HostSpec>,
    /// The cluster as this many separate servers behind a round-robin balancer: its instances
    /// (and hosts) split into equal partitions, each with a policy of its own, the stream dealt
    /// to them in turn ([`crate::partitions`]). Default 1: one policy over every instance.
    #[serde(default = "one_partition")]
    pub partitions: usize,
}

/// `[cluster.pipeline]`: stage times of one request at one thread, how much of them more
/// threads do not shorten, the hop between stages, and the model's parameters. Start-up times
/// (`startup_ms`, `warm_startup_ms`) are the whole model's; a stage takes its share of layers.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineSpec {
    #[serde(default = "pipeline_runtime")]
    pub runtime: String,
    pub layers: u16,
    pub stage_ms: Vec<f64>,
    /// s(C) = ms·(serial + (1 − serial)/C); 1: threads do not help.
    #[serde(default = "one")]
    pub serial_fraction: f64,
    #[serde(default)]
    pub hop_ms: f64,
    #[serde(default)]
    pub model_mb: f64,
}

fn pipeline_runtime() -> String {
    "fixed:128x1".into()
}

/// `[cluster.hosts]`: `count` hosts (QUART's servers) of `slots` device slots, `cores` cores
/// (the threads of the instances on a host stay within them; default: unbounded) and
/// `cache_mb` of memory for cached parameters each.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    pub count: u16,
    pub slots: u16,
    pub cores: Option<u16>,
    pub cache_mb: Option<f64>,
}

impl PipelineSpec {
    pub fn profile(&self) -> Result<StageTimes, ScenarioError> {
        let runtime: RuntimeSpec =
            self.runtime.parse().map_err(|e| ScenarioError::Invalid(format!("{e}")))?;
        let stages = self.stage_ms.iter().map(|&ms| StageTime::amdahl(ms, self.serial_fraction)).collect();
        Ok(StageTimes { runtime, layers: self.layers, stages, hop_ms: self.hop_ms })
    }
}

fn one() -> f64 {
    1.0
}

fn one_partition() -> usize {
    1
}

fn thousand() -> f64 {
    1000.0
}

/// `T = C + K·N`: the prefill C, either `c_ms` (a constant) or `prefill_ms` (by the prompts'
/// total tokens; keys are token counts), and `k_ms` per output token by batch size (keys are
/// batch sizes); optionally what a decode step's cached tokens add (`context_ms_per_token` for
/// each beyond `k_context` per sequence, the context `k_ms` was measured at; `cargo bench -p
/// morph-engine --bench decoder_latency` measures both).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GenerationCost {
    pub c_ms: Option<f64>,
    pub prefill_ms: Option<BTreeMap<String, f64>>,
    pub k_ms: BTreeMap<String, f64>,
    #[serde(default)]
    pub k_context: u32,
    #[serde(default)]
    pub context_ms_per_token: f64,
    /// Prompt tokens fed per iteration (chunked prefill); default with `prefill_ms` 256, the
    /// decoder's own (`morph serve --prefill-chunk`), with `c_ms` 0: each prompt whole.
    pub prefill_chunk: Option<u32>,
}

/// The decoder's default prefill chunk (`morph serve --prefill-chunk`).
const PREFILL_CHUNK: u32 = 256;

impl GenerationCost {
    /// The prefill chunk: as given; else the decoder's default with a prefill priced by tokens,
    /// and whole prompts with a constant C (which a prompt pays once, not per chunk).
    pub(super) fn chunk(&self) -> u32 {
        self.prefill_chunk.unwrap_or(if self.prefill_ms.is_some() { PREFILL_CHUNK } else { 0 })
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct PolicySpec {
    pub name: String,
    /// How the policy is shown in reports (default: its name), to tell variants apart.
    pub label: Option<String>,
    /// What the policy is told of each generation's output length.
    #[serde(default)]
    pub predictor: Predictor,
    /// Latency at equal cost: the label of a policy listed before this one; this policy's
    /// `headroom` is searched until its instance-seconds match that policy's on each run.
    #[serde(default)]
    pub equal_cost_to: Option<String>,
    #[serde(flatten)]
    pub params: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SweepParam {
    /// Mean arrival rate (req/s); traces are compressed in time to reach it.
    Rate,
    /// Coefficient of variation of gamma arrivals.
    Cv,
    /// Instances of every runtime.
    Instances,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sweep {
    pub param: SweepParam,
    pub values: Vec<f64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    pub duration_s: f64,
    #[serde(default = "default_seeds")]
    pub seeds: Vec<u64>,
    pub slo_ms: Option<f64>,
    #[serde(default)]
    pub warmup_s: f64,
    /// Generations' `max_tokens` (what a policy knows without a prediction).
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u32,
    pub workload: Workload,
    pub cluster: Cluster,
    pub policies: Vec<PolicySpec>,
    pub sweep: Option<Sweep>,
}

fn default_max_tokens() -> u32 {
    4096
}

fn default_seeds() -> Vec<u64> {
    vec![1]
}

/// One policy on one stream.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub sweep: Option<(SweepParam, f64)>,
    pub seed: u64,
    #[serde(flatten)]
    pub report: Report,
}
