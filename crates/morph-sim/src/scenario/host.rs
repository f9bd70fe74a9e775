//! Host scenario files (TOML): several models on one host's cores, each model a single-model
//! scenario (its workload, cluster, SLO and one policy), run shared by load as one
//! `morph serve --config` serves them, and at every static split of the cores (single-model
//! servers pinned to disjoint cores: the best static choice at equal cost). See
//! `assets/scenarios/hosts/*.toml` in the repository.
//!
//! ```toml
//! name = "rag-app-cpu"
//! cores = 2
//! duration_s = 300                  # replaces each model scenario's
//! seeds = [1, 2, 3]                 # replace each model scenario's
//! splits = [[[0], [0], [1]]]        # optional: each split's cores per model (default: every
//!                                   # split of consecutive cores, a core or more per model)
//! [[models]]
//! name = "embedder"
//! scenario = "rag_embedder_cpu.toml"  # relative to this file; its one policy serves it
//! core_slo_ms = 100                 # optional: the SLO the controller reads (default slo_ms)
//! deadline_ms = 1500                # optional: give up on requests that cannot start in time
//! ```

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use morph_core::Cores;
use morph_core::time::ms_to_nanos;
use morph_policy::registry::Context;
use serde::{Deserialize, Serialize};

use super::spec::{Scenario, ScenarioError};
use super::{Setup, read_toml};
use crate::metrics::WindowReport;
use crate::shared_host::{CoreMoveAt, HostReport, HostedModel, PeriodCores, Sharing, simulate_host};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostModelSpec {
    pub name: String,
    pub scenario: PathBuf,
    /// The SLO the core controller reads, as the live deployment's `slo_ms` (a decoder's is
    /// an output token's); default: the model scenario's `slo_ms`.
    pub core_slo_ms: Option<f64>,
    /// As the live deployment's `deadline_ms`: requests that can no longer start in time are
    /// given up (`morph_policy::give_up`); default: none.
    pub deadline_ms: Option<f64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostScenario {
    pub name: String,
    pub cores: Cores,
    pub duration_s: f64,
    #[serde(default = "one_seed")]
    pub seeds: Vec<u64>,
    /// Each static split: every model's cores, by index (models pinned to the same cores
    /// share them).
    pub splits: Option<Vec<Vec<Vec<Cores>>>>,
    pub models: Vec<HostModelSpec>,
    /// Each model's scenario, loaded.
    #[serde(skip)]
    pub scenarios: Vec<Scenario>,
}

fn one_seed() -> Vec<u64> {
    vec![1]
}

/// One model's results in one host run.
#[derive(Debug, Clone, Serialize)]
pub struct HostedRow {
    pub name: String,
    pub core_seconds: f64,
    #[serde(flatten)]
    pub measured: WindowReport,
}

/// One host run: a seed, a way of sharing, each model's results and its cores over time.
#[derive(Debug, Clone, Serialize)]
pub struct HostRow {
    pub seed: u64,
    pub sharing: String,
    pub models: Vec<HostedRow>,
    /// The lowest SLO attainment of the models: the application's, when each of its requests
    /// needs every model.
    pub least_attainment: f64,
    pub periods: Vec<PeriodCores>,
    /// The core controller's moves.
    pub moves: Vec<CoreMoveAt>,
}

impl HostRow {
    fn new(seed: u64, report: HostReport) -> Self {
        let models: Vec<HostedRow> = report
            .models
            .into_iter()
            .zip(&report.core_seconds)
            .map(|((name, r), &core_seconds)| HostedRow { name, core_seconds, measured: r.measured })
            .collect();
        let least_attainment = models.iter().map(|m| m.measured.slo_attainment).fold(1.0, f64::min);
        Self {
            seed,
            sharing: report.sharing,
            models,
            least_attainment,
            periods: report.periods,
            moves: report.moves,
        }
    }
}

fn invalid(message: String) -> ScenarioError {
    ScenarioError::Invalid(message)
}

impl HostScenario {
    /// Loads a host scenario and each model's scenario; every bad value is refused naming its
    /// model and key. `tokenize` is as [`Scenario::load`] takes it.
    pub fn load(path: &Path, tokenize: &dyn Fn(&str) -> Result<u32, String>) -> Result<Self, ScenarioError> {
        let mut host: HostScenario = read_toml(path)?;
        host.check()?;
        let dir = path.parent().unwrap_or(Path::new("."));
        for model in &host.models {
            let at = dir.join(&model.scenario);
            let scenario = Scenario::load(&at, tokenize)
                .map_err(|e| invalid(format!("models '{}': scenario {}: {e}", model.name, at.display())))?;
            let bad = |key: &str, why: &str| invalid(format!("models '{}': {key}: {why}", model.name));
            if scenario.slo_ms.is_none() {
                return Err(bad("slo_ms", "its scenario needs one (the controller reads it)"));
            }
            if scenario.sweep.is_some() {
                return Err(bad("sweep", "a hosted model runs at one point"));
            }
            if scenario.policies.len() != 1 {
                return Err(bad("policies", "a hosted model's scenario lists exactly one policy"));
            }
            host.scenarios.push(scenario);
        }
        Ok(host)
    }

    fn check(&self) -> Result<(), ScenarioError> {
        if self.cores == 0 {
            return Err(invalid("cores: must be at least 1".into()));
        }
        if !(self.duration_s.is_finite() && self.duration_s > 0.0) {
            return Err(invalid(format!("duration_s: must be a positive number, got {}", self.duration_s)));
        }
        if self.seeds.is_empty() {
            return Err(invalid("seeds: is empty".into()));
        }
        if self.models.is_empty() {
            return Err(invalid("models: a host scenario needs at least one [[models]]".into()));
        }
        let mut names = BTreeSet::new();
        for model in &self.models {
            if !names.insert(&model.name) {
                return Err(invalid(format!("models '{}': two models have this name", model.name)));
            }
        }
        for model in &self.models {
            for (key, ms) in [("core_slo_ms", model.core_slo_ms), ("deadline_ms", model.deadline_ms)] {
                if ms.is_some_and(|ms| !(ms.is_finite() && ms > 0.0)) {
                    return Err(invalid(format!(
                        "models '{}': {key}: must be a positive number",
                        model.name
                    )));
                }
            }
        }
        for split in self.splits.iter().flatten() {
            Sharing::Split(split.clone())
                .check(self.cores, self.models.len())
                .map_err(|why| invalid(format!("splits: {why}")))?;
        }
        if self.splits.is_none() && usize::from(self.cores) < self.models.len() {
            let why =
                format!("{} cores cannot give each of {} models its own", self.cores, self.models.len());
            return Err(invalid(format!("splits: {why}; list the splits to compare")));
        }
        Ok(())
    }

    /// The ways of sharing run: by load, then each static split.
    pub fn sharings(&self) -> Vec<Sharing> {
        let splits = match &self.splits {
            Some(splits) => splits.iter().cloned().map(Sharing::Split).collect(),
            None => Sharing::splits(self.cores, self.models.len()),
        };
        std::iter::once(Sharing::ByLoad).chain(splits).collect()
    }

    /// Runs every way of sharing on every seed, each model on the identical request stream in
    /// every run; `progress(done, total)` after each run.
    pub fn run(&self, progress: &mut dyn FnMut(usize, usize)) -> Result<Vec<HostRow>, ScenarioError> {
        let scenarios: Vec<Scenario> =
            self.scenarios.iter().map(|s| Scenario { duration_s: self.duration_s, ..s.clone() }).collect();
        let setups = scenarios.iter().map(Scenario::setup).collect::<Result<Vec<Setup>, _>>()?;
        let sharings = self.sharings();
        let total = sharings.len() * self.seeds.len();
        let mut rows = Vec::with_capacity(total);
        for &seed in &self.seeds {
            for sharing in &sharings {
                let models = self
                    .models
                    .iter()
                    .zip(&scenarios)
                    .zip(&setups)
                    .map(|((spec, scenario), setup)| hosted(spec, scenario, setup, seed))
                    .collect::<Result<Vec<_>, _>>()?;
                rows.push(HostRow::new(seed, simulate_host(models, self.cores, sharing)));
                progress(rows.len(), total);
            }
        }
        Ok(rows)
    }
}

/// A model of the host as its scenario describes it, on `seed`'s stream.
fn hosted<'a>(
    model: &HostModelSpec,
    scenario: &Scenario,
    setup: &'a Setup,
    seed: u64,
) -> Result<HostedModel<'a>, ScenarioError> {
    let (name, spec) = (&model.name, &scenario.policies[0]);
    if scenario.cluster.partitions != 1 {
        return Err(invalid(format!(
            "models '{name}': cluster.partitions: a shared host runs each model as one server"
        )));
    }
    let params = serde_json::Value::Object(spec.params.clone());
    let context = Context { deadline: model.deadline_ms.map(ms_to_nanos), ..setup.context.clone() };
    let policy = morph_policy::registry::build(&spec.name, &params, &context)?;
    let (cluster, slots) = scenario.units(None)?;
    let cluster = policy.layout(slots).unwrap_or(cluster);
    if cluster.is_empty() {
        return Err(invalid(format!("models '{name}': policy '{}' needs cluster.runtimes", spec.name)));
    }
    let requests = scenario
        .stream(None, seed)?
        .enumerate()
        .map(|(i, r)| spec.predictor.tell_one(i as u64, r, scenario.max_tokens))
        .collect();
    let slo = ms_to_nanos(scenario.slo_ms.expect("checked at load"));
    let core_slo = model.core_slo_ms.map_or(slo, ms_to_nanos);
    Ok(HostedModel {
        name: name.clone(),
        policy,
        cluster,
        cost: setup.cost.as_ref(),
        requests,
        options: setup.options.clone(),
        slo,
        core_slo,
    })
}
