//! Scenario files (TOML): a workload, a cluster, an SLO, the policies to compare, seeds, and
//! optionally a sweep. Every policy runs on the identical request stream. See
//! `assets/scenarios/*.toml` in the repository for examples.
//!
//! ```toml
//! name = "twitter-stable"
//! duration_s = 60
//! seeds = [1]
//! slo_ms = 150
//! warmup_s = 10                                   # requests before this are served, not measured
//! max_tokens = 4096                               # generations' cap, known to every policy
//! [workload]
//! arrivals = { kind = "poisson", rate = 1000 }   # gamma {rate, cv} | mmpp {rates, dwell_s}
//!                                                 # | trace {path, speedup, loop, ...}
//! lengths = { kind = "twitter", max = 512 }       # fixed {len} | uniform {min, max} | trace {path, input_column}
//!                                                 # | corpus {path} (tokenized) | empirical {values}
//! outputs = { kind = "trace", path = "...", input_column = "GeneratedTokens" }  # generation only
//! patience_s = 2.0                                # optional: clients give up after this (cancelled)
//! [cluster]
//! profile = "../../../shared/data/profiles/distilbert_trt_gpu_bs1-64_seq1-512.json"  # relative to this file
//! variants = ["stage1.json"]                      # profiles of a stage or token plan (their "stage"/"plan" keys)
//! # or, for generation, SSJF's linear cost T = C + K·N (K in ms per token by batch size):
//! # generation = { c_ms = 120, k_ms = { "1" = 45, "4" = 60 } }
//! # with the prefill by the prompts' total tokens instead of a constant C, fed in chunks of
//! # `prefill_chunk` tokens per iteration (default 256, as the decoder does; 0: whole prompts):
//! # generation = { prefill_ms = { "32" = 90, "512" = 1400 }, k_ms = { "1" = 45, "4" = 60 } }
//! # and a decode step's cached tokens priced (ms per token past k_context per sequence):
//! # generation = { …, k_context = 128, context_ms_per_token = 0.0075 }
//! dynamic_penalty = 1.0
//! instances = 10                                  # device slots, for policies that lay out their own
//! runtimes = [{ runtime = "dynamic:512x8", instances = 10 }]   # for the others
//! partitions = 1                                  # separate servers behind a round-robin balancer,
//!                                                 # each a policy over its share (a thread each)
//! startup_ms = 1000                               # a launched instance's load time (cold)
//! warm_startup_ms = 1000                          # … when its parameters are cached on its host
//! # or, for a pipelined model (QUART), stage times instead of a profile, and hosts:
//! # pipeline = { layers = 48, stage_ms = [17.1, …], serial_fraction = 0.7, hop_ms = 1, model_mb = 43000 }
//! # hosts = { count = 12, slots = 4, cores = 16, cache_mb = 1048576 }  # cores bound Σ threads
//! [[policies]]
//! name = "dynamic-batching"
//! label = "db-16k"                                  # optional: its name in reports
//! equal_cost_to = "quart"                           # optional: headroom searched to that cost (core-seconds)
//! max_batch_tokens = 16384                         # the policy's own parameters
//! [[policies]]
//! name = "arlo"                                    # arlo | arlo-paper | arlo-ilb | arlo-ig | st | dt | infaas
//! scaling = { rule = "target-tracking" }
//! [[policies]]
//! name = "ssjf"                                    # ssjf | fcfs (generation)
//!                                                  # quart | infless-like | inferline-like | cocktail-like
//!                                                  # | uniform-pipeline (cluster.pipeline)
//! predictor = "oracle"                             # none (default) | oracle | { lognormal = { mu, sigma } }
//!                                                  # | { recorded = { path, column } } (a real predictor's)
//! [sweep]                                          # optional: one run per value
//! param = "rate"                                   # rate | cv | instances
//! values = [500, 1000, 2000]
//! ```

mod check;
mod host;
mod spec;
mod warnings;

pub use host::{HostModelSpec, HostRow, HostScenario, HostedRow};
pub use spec::{
    Cluster, GenerationCost, HostSpec, PipelineSpec, PolicySpec, Row, RuntimeGroup, Scenario, ScenarioError,
    Sweep, SweepParam,
};
pub use warnings::DROP_WARNING_SHARE;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use morph_core::{
    HostSlots, LatencyProfile, RuntimeSpec, StageTimes, StepBudget, UnitSpec, time::ms_to_nanos,
};

use morph_policy::registry::Context;

use crate::cost::{ContextCost, CostModel, LinearGeneration, PipelineCost, Prefill, ProfileCost, Startup};
use crate::driver::SimOptions;
use crate::metrics::Report;
use crate::partitions::{Partition, simulate_partitioned};
use crate::workload::{Arrivals, Lengths, Predictor, RequestStream, Workload, corpus};

impl Scenario {
    /// Loads a scenario. `tokenize` gives a text's length in tokens; it is called only when the
    /// lengths come from a corpus (`kind = "corpus"`).
    pub fn load(path: &Path, tokenize: &dyn Fn(&str) -> Result<u32, String>) -> Result<Self, ScenarioError> {
        let mut scenario: Scenario = read_toml(path)?;
        check::check(&scenario)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        scenario.resolve_paths(dir);
        scenario.load_predictions()?;
        if let Some(mix) = &mut scenario.workload.service {
            mix.load()?;
        }
        if let Lengths::Corpus { path } = &scenario.workload.lengths {
            let values = corpus::load(path)?
                .iter()
                .map(|t| tokenize(t))
                .collect::<Result<Vec<u32>, String>>()
                .map_err(|e| ScenarioError::Invalid(format!("tokenizing corpus {}: {e}", path.display())))?;
            scenario.workload.lengths = Lengths::Empirical { values };
        }
        Ok(scenario)
    }

    fn resolve_paths(&mut self, dir: &Path) {
        for profile in self.cluster.profile.iter_mut().chain(&mut self.cluster.variants) {
            if profile.is_relative() {
                *profile = dir.join(&*profile);
            }
        }
        if let Arrivals::Trace { trace, .. } = &mut self.workload.arrivals {
            trace.resolve(dir);
        }
        for lengths in std::iter::once(&mut self.workload.lengths).chain(self.workload.outputs.as_mut()) {
            match lengths {
                Lengths::Trace { trace } => trace.resolve(dir),
                Lengths::Corpus { path } if path.is_relative() => *path = dir.join(&*path),
                _ => {}
            }
        }
        if let Some(mix) = &mut self.workload.service
            && mix.profile.is_relative()
        {
            mix.profile = dir.join(&mix.profile);
        }
        for spec in &mut self.policies {
            if let Predictor::Recorded { path, .. } = &mut spec.predictor
                && path.is_relative()
            {
                *path = dir.join(&*path);
            }
        }
    }

    /// Reads the columns of recorded predictors.
    fn load_predictions(&mut self) -> Result<(), ScenarioError> {
        for spec in &mut self.policies {
            if let Predictor::Recorded { path, column, values } = &mut spec.predictor {
                let trace = crate::workload::Trace {
                    input_column: Some(column.clone()),
                    ..crate::workload::Trace::new(path.clone())
                };
                *values = std::sync::Arc::new(trace.input_lengths()?);
            }
        }
        Ok(())
    }

    /// The configured units of one partition (of `cluster.partitions`; the whole cluster by
    /// default), one per instance (decoders when the workload generates, else encoders), and its
    /// number of slots. With no runtimes listed, the list is empty and only policies with their
    /// own layout can run.
    fn units(&self, instances_override: Option<usize>) -> Result<(Vec<UnitSpec>, usize), ScenarioError> {
        let n = self.cluster.partitions;
        let share = |key: &str, count: usize| match count % n {
            0 => Ok(count / n),
            _ => Err(ScenarioError::Invalid(format!(
                "{key}: {count} instances do not split into cluster.partitions = {n} equal shares"
            ))),
        };
        let mut cluster = Vec::new();
        for (i, group) in self.cluster.runtimes.iter().enumerate() {
            let runtime: RuntimeSpec =
                group.runtime.parse().map_err(|e| ScenarioError::Invalid(format!("{e}")))?;
            let unit = match self.workload.outputs {
                Some(_) => UnitSpec::generation(runtime),
                None => UnitSpec::batch(runtime),
            };
            let count =
                share(&format!("cluster.runtimes[{i}]"), instances_override.unwrap_or(group.instances))?;
            cluster.extend(std::iter::repeat_n(unit, count));
        }
        let hosts = self.cluster.hosts.as_ref().map(|s| usize::from(s.count) * usize::from(s.slots));
        let slots = instances_override.or(self.cluster.instances).or(hosts);
        let slots = match slots {
            Some(slots) => share("cluster.instances", slots)?,
            None => cluster.len(),
        };
        if slots == 0 {
            return Err(ScenarioError::Invalid("the cluster has no instances".into()));
        }
        Ok((cluster, slots))
    }

    fn options(&self, pipeline: Option<Arc<StageTimes>>) -> SimOptions {
        let cold = ms_to_nanos(self.cluster.startup_ms);
        let warm = self.cluster.warm_startup_ms.map_or(cold, ms_to_nanos);
        let mb = |mb: f64| (mb * 1e6).round() as u64;
        let defaults = SimOptions::default();
        let hosts = self.cluster.hosts.as_ref();
        SimOptions {
            slo: self.slo_ms.map(ms_to_nanos),
            warmup: ms_to_nanos(self.warmup_s * 1e3),
            startup: Startup { cold, warm },
            // A partition's share of the hosts (checked to split evenly).
            hosts: hosts.map_or(defaults.hosts, |s| {
                let slots = HostSlots::new(s.count / self.cluster.partitions as u16, s.slots);
                match s.cores {
                    Some(cores) => slots.with_cores(cores),
                    None => slots,
                }
            }),
            cache_bytes: hosts.and_then(|s| s.cache_mb).map_or(defaults.cache_bytes, mb),
            model_bytes: self.cluster.pipeline.as_ref().map_or(0, |p| mb(p.model_mb)),
            pipeline,
            prefill_chunk: self.cluster.generation.as_ref().map_or(0, GenerationCost::chunk),
            ..defaults
        }
    }

    /// The workload with a sweep value applied. A trace swept to another rate is replayed
    /// faster or slower (its timestamps divided by a speedup that gives that mean rate); the
    /// run still lasts `duration_s` of simulated time, so a trace compressed below it ends
    /// early unless it loops.
    pub fn workload_at(&self, sweep: Option<(SweepParam, f64)>) -> Result<Workload, ScenarioError> {
        let mut w = self.workload.clone();
        match sweep {
            Some((SweepParam::Rate, rate)) => {
                let base = match &w.arrivals {
                    Arrivals::Trace { trace, speedup, .. } => {
                        let times = trace.times()?;
                        let span =
                            times.last().copied().unwrap_or(0.0) - times.first().copied().unwrap_or(0.0);
                        times.len() as f64 / span.max(f64::MIN_POSITIVE) * speedup
                    }
                    other => other.mean_rate().unwrap_or(1.0),
                };
                w.arrivals = w.arrivals.scaled(rate / base);
            }
            Some((SweepParam::Cv, cv)) => match &mut w.arrivals {
                Arrivals::Gamma { cv: c, .. } => *c = cv,
                _ => return Err(ScenarioError::Invalid("a cv sweep needs gamma arrivals".into())),
            },
            Some((SweepParam::Instances, _)) | None => {}
        }
        Ok(w)
    }

    /// The request stream of `seed` at a sweep point. A rate sweep over a process that stays
    /// itself when thinned (Poisson, MMPP, walk) keeps each rate as a share of the sweep's
    /// highest rate, drawn from the same candidates: a higher load carries every request of a
    /// lower one, with the same burst states and lengths (common random numbers, nested). Other
    /// sweeps change the workload itself ([`Scenario::workload_at`]): a gamma or trace stream
    /// at another rate is the same draws rescaled in time.
    pub fn stream(
        &self,
        point: Option<(SweepParam, f64)>,
        seed: u64,
    ) -> Result<RequestStream, ScenarioError> {
        let top = self
            .sweep
            .as_ref()
            .filter(|s| s.param == SweepParam::Rate)
            .map(|s| s.values.iter().copied().fold(f64::MIN, f64::max));
        if let (Some((SweepParam::Rate, rate)), Some(top)) = (point, top)
            && self.workload.arrivals.thins()
        {
            let highest = self.workload_at(Some((SweepParam::Rate, top)))?;
            return Ok(highest.stream(self.duration_s, seed, rate / top)?);
        }
        Ok(self.workload_at(point)?.stream(self.duration_s, seed, 1.0)?)
    }

    /// The sweep's points (one `None` without a sweep).
    pub fn points(&self) -> Vec<Option<(SweepParam, f64)>> {
        match &self.sweep {
            Some(s) => s.values.iter().map(|v| Some((s.param, *v))).collect(),
            None => vec![None],
        }
    }

    /// What every run of this scenario shares: the cost model, the policies' context and the
    /// driver's options.
    pub(crate) fn setup(&self) -> Result<Setup, ScenarioError> {
        let pipeline = self.cluster.pipeline.as_ref().map(PipelineSpec::profile).transpose()?.map(Arc::new);
        let mut plans = BTreeMap::new();
        let mut generation = None;
        let (profile, cost): (Option<Arc<LatencyProfile>>, Box<dyn CostModel>) =
            match (&self.cluster.profile, &self.cluster.generation) {
                (None, None) if pipeline.is_some() => {
                    (None, Box::new(PipelineCost(pipeline.clone().expect("checked"))))
                }
                (Some(path), None) => {
                    let profile = LatencyProfile::load(path)?;
                    let mut cost = ProfileCost::new(profile.clone(), self.cluster.dynamic_penalty);
                    for path in &self.cluster.variants {
                        let variant = LatencyProfile::load(path)?;
                        let key = (variant.stage.unwrap_or(0), variant.plan.unwrap_or_default());
                        if variant.stage.is_none() {
                            plans.insert(key.1, Arc::new(variant.clone()));
                        }
                        cost = cost.with_variant(key.0, key.1, variant);
                    }
                    (Some(Arc::new(profile)), Box::new(cost))
                }
                (None, Some(g)) => {
                    let prefill = match (g.c_ms, &g.prefill_ms) {
                        (Some(c), None) => Prefill::Constant(c),
                        (None, Some(table)) => Prefill::ByTokens(keyed(table, "prefill_ms")?),
                        _ => {
                            let msg = "cluster.generation needs exactly one of c_ms and prefill_ms";
                            return Err(ScenarioError::Invalid(msg.into()));
                        }
                    };
                    let context =
                        ContextCost { measured_at: g.k_context, ms_per_token: g.context_ms_per_token };
                    let cost = LinearGeneration::new(prefill, keyed(&g.k_ms, "k_ms")?)
                        .and_then(|c| c.with_context(context))
                        .map_err(ScenarioError::Invalid)?;
                    generation = Some(cost.costs());
                    (None, Box::new(cost))
                }
                _ => {
                    let msg = "the cluster needs exactly one of profile, generation and pipeline";
                    return Err(ScenarioError::Invalid(msg.into()));
                }
            };
        let mut options = self.options(pipeline.clone());
        let table = self.workload.service.as_ref().and_then(|m| m.table.clone());
        let accuracy = table.as_ref().map(|t| t.profiling.clone()).unwrap_or_default();
        options.correctness = table;
        let hosts = Some(options.hosts.clone());
        let context = Context {
            profile,
            slo: options.slo,
            pipeline,
            generation,
            // The step bounded as the decoder bounds it (the chunk; every piece in a step).
            step: StepBudget { prefill_chunk: options.prefill_chunk, step_prompt_tokens: None },
            hosts,
            plans,
            accuracy,
            refits: None,
            deadline: None,
        };
        Ok(Setup { cost, context, options })
    }

    /// Runs every policy, for every seed and sweep value, on identical request streams;
    /// `progress(done, total)` is called after each run.
    pub fn run(&self, progress: &mut dyn FnMut(usize, usize)) -> Result<Vec<Row>, ScenarioError> {
        let Setup { cost, context: ctx, options: base } = self.setup()?;
        let points = self.points();
        let total = points.len() * self.seeds.len() * self.policies.len();
        let mut rows = Vec::new();
        for point in points {
            let instances = match point {
                Some((SweepParam::Instances, n)) => Some(n.round().max(1.0) as usize),
                _ => None,
            };
            let (cluster, slots) = self.units(instances)?;
            let options = base.clone();
            for &seed in &self.seeds {
                let first = rows.len();
                for spec in &self.policies {
                    let params = serde_json::Value::Object(spec.params.clone());
                    let run = |params: &serde_json::Value| -> Result<Report, ScenarioError> {
                        let partitions = (0..self.cluster.partitions)
                            .map(|_| {
                                let policy = morph_policy::registry::build(&spec.name, params, &ctx)?;
                                let layout = policy.layout(slots).unwrap_or_else(|| cluster.clone());
                                if layout.is_empty() {
                                    let msg = format!("policy '{}' needs cluster.runtimes", spec.name);
                                    return Err(ScenarioError::Invalid(msg));
                                }
                                Ok(Partition { policy, cluster: layout, options: options.clone() })
                            })
                            .collect::<Result<Vec<Partition>, ScenarioError>>()?;
                        let told = self
                            .stream(point, seed)?
                            .enumerate()
                            .map(|(i, r)| spec.predictor.tell_one(i as u64, r, self.max_tokens));
                        Ok(simulate_partitioned(partitions, cost.as_ref(), told))
                    };
                    let mut report = match &spec.equal_cost_to {
                        None => run(&params)?,
                        Some(other) => {
                            let target = rows[first..]
                                .iter()
                                .find(|r: &&Row| &r.report.policy == other)
                                .map(|r| r.report.core_seconds)
                                .ok_or_else(|| {
                                    ScenarioError::Invalid(format!(
                                        "equal_cost_to = '{other}': no policy of that label is listed before '{}'",
                                        spec.name
                                    ))
                                })?;
                            equal_cost(&params, target, run)?
                        }
                    };
                    report.policy = spec.label.clone().unwrap_or(report.policy);
                    if let Some(other) = &spec.equal_cost_to {
                        report.policy.push_str(&format!(" @{other} cost"));
                    }
                    report.policy.push_str(&spec.predictor.label());
                    rows.push(Row { sweep: point, seed, report });
                    progress(rows.len(), total);
                }
            }
        }
        Ok(rows)
    }
}

/// A scenario file's contents, as `T`.
fn read_toml<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, ScenarioError> {
    let shown = path.display().to_string();
    let text =
        std::fs::read_to_string(path).map_err(|source| ScenarioError::Io { path: shown.clone(), source })?;
    toml::from_str(&text).map_err(|e| ScenarioError::Parse { path: shown, message: e.to_string() })
}

/// What every run of a scenario shares.
pub(crate) struct Setup {
    pub(crate) cost: Box<dyn CostModel>,
    pub(crate) context: Context,
    pub(crate) options: SimOptions,
}

/// Bisection steps of the equal-cost search (each a whole run).
const EQUAL_COST_STEPS: usize = 12;

/// Runs the policy with `headroom` searched over [-0.9, 3] until its cost, the core-seconds its
/// instances held (instance-seconds weighted by their threads), is closest to `target`: more
/// headroom asks for more replicas, so the cost rises with it.
fn equal_cost(
    params: &serde_json::Value,
    target: f64,
    run: impl Fn(&serde_json::Value) -> Result<Report, ScenarioError>,
) -> Result<Report, ScenarioError> {
    let with = |headroom: f64| {
        let mut p = params.clone();
        p["headroom"] = serde_json::json!(headroom);
        run(&p)
    };
    let (mut low, mut high) = (-0.9, 3.0);
    let mut best = with(0.0)?;
    for _ in 0..EQUAL_COST_STEPS {
        let mid = (low + high) / 2.0;
        let report = with(mid)?;
        if report.core_seconds < target {
            low = mid;
        } else {
            high = mid;
        }
        if (report.core_seconds - target).abs() < (best.core_seconds - target).abs() {
            best = report;
        }
    }
    Ok(best)
}

/// A table's keys as numbers: `key` names the table in the error.
fn keyed(
    table: &std::collections::BTreeMap<String, f64>,
    key: &str,
) -> Result<Vec<(u32, f64)>, ScenarioError> {
    table
        .iter()
        .map(|(k, v)| k.trim().parse().map(|k| (k, *v)))
        .collect::<Result<Vec<(u32, f64)>, _>>()
        .map_err(|e| ScenarioError::Invalid(format!("cluster.generation.{key}: {e}")))
}
