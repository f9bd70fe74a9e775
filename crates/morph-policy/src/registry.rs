//! Policies by name, with parameters from a scenario file or the command line.

use std::collections::BTreeMap;
use std::sync::Arc;

use morph_core::{HostSlots, LatencyProfile, Nanos, Policy, StageTimes, TokenPlan, time::ms_to_nanos};

use crate::arlo::ServiceModel;
use crate::arlo::{ArloConfig, ArloPolicy, PRESETS};
use crate::otas::{OTAS_POLICIES, OtasConfig, OtasPolicy, PlanEntry, PlanTable};
use crate::pipeline::{PipelinePolicy, PoolConfig, Sizer};
use crate::quart::baselines::cocktail::{CocktailConfig, CocktailSizer};
use crate::quart::baselines::inferline::{InferlineConfig, InferlineSizer};
use crate::quart::baselines::infless::{InflessConfig, InflessSizer};
use crate::quart::baselines::uniform::{UniformConfig, UniformSizer};
use crate::quart::{QuartConfig, QuartSizer};
use crate::ssjf::{SsjfConfig, SsjfPolicy};
use crate::{DynamicBatching, DynamicBatchingConfig};

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error(
        "unknown policy '{0}' (known: dynamic-batching, ssjf, fcfs, {PRESETS:?}, {PIPELINES:?}, {OTAS_POLICIES:?})"
    )]
    Unknown(String),
    #[error("policy '{0}' needs a pipeline (a scenario's cluster.pipeline; `morph serve --stages N`)")]
    NeedsPipeline(String),
    #[error("parameters of policy '{name}': {source}")]
    Params { name: String, source: serde_json::Error },
    #[error("policy '{0}' needs a latency profile (a scenario's cluster.profile, or --profile)")]
    NeedsProfile(String),
    #[error(
        "policy '{name}' plans with token plan {plan}, which has no latency profile (a profile naming \"plan\": {plan})"
    )]
    NeedsPlanProfile { name: String, plan: TokenPlan },
    #[error(
        "policy '{name}' plans with token plan {plan}, which has no accuracy (the policy's accuracy table, or a profile's accuracy.json)"
    )]
    NeedsAccuracy { name: String, plan: TokenPlan },
    #[error("policy '{0}' needs an SLO (slo_ms in the scenario or the policy, or --slo-ms)")]
    NeedsSlo(String),
}

/// What a policy may take from the deployment it runs in.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// The instances' latency profile.
    pub profile: Option<Arc<LatencyProfile>>,
    /// The deployment's latency SLO.
    pub slo: Option<Nanos>,
    /// A pipelined model's stage times, for pipeline policies.
    pub pipeline: Option<Arc<StageTimes>>,
    /// The hosts and their slots; default: one host with every slot.
    pub hosts: Option<HostSlots>,
    /// Latency profiles of token plans other than the plain model's (OTAS's γ).
    pub plans: BTreeMap<TokenPlan, Arc<LatencyProfile>>,
    /// Accuracy per task (by task index) under each token plan, from the profiler.
    pub accuracy: BTreeMap<TokenPlan, Vec<f64>>,
}

/// The pipeline policies (QUART and its baselines, spec §2.5).
pub const PIPELINES: [&str; 5] =
    ["quart", "infless-like", "inferline-like", "cocktail-like", "uniform-pipeline"];

/// Builds the policy `name` from `params` (a JSON object of its config fields; missing fields
/// take the preset's values, unknown ones are an error).
pub fn build(name: &str, params: &serde_json::Value, ctx: &Context) -> Result<Box<dyn Policy>, PolicyError> {
    let params_err = |source| PolicyError::Params { name: name.to_string(), source };
    if name == "dynamic-batching" {
        let config: DynamicBatchingConfig = serde_json::from_value(params.clone()).map_err(params_err)?;
        config.check().map_err(|why| params_err(serde::de::Error::custom(why)))?;
        return Ok(Box::new(DynamicBatching::new(config)));
    }
    if let Some(preset) = SsjfConfig::preset(name) {
        let config: SsjfConfig = with_params(preset, params).map_err(params_err)?;
        return Ok(Box::new(SsjfPolicy::new(config)));
    }
    if PIPELINES.contains(&name) {
        return build_pipeline(name, params, ctx);
    }
    if let Some(preset) = OtasConfig::preset(name) {
        let config: OtasConfig = with_nested_params(preset, params).map_err(params_err)?;
        config.check(name).map_err(|why| params_err(serde::de::Error::custom(why)))?;
        let table = plan_table(name, &config, ctx)?;
        return Ok(Box::new(OtasPolicy::new(name, config, table)));
    }
    let preset = ArloConfig::preset(name).ok_or_else(|| PolicyError::Unknown(name.to_string()))?;
    let config: ArloConfig = with_params(preset, params).map_err(params_err)?;
    let profile = ctx.profile.clone().ok_or_else(|| PolicyError::NeedsProfile(name.to_string()))?;
    let slo =
        config.slo_ms.map(ms_to_nanos).or(ctx.slo).ok_or_else(|| PolicyError::NeedsSlo(name.to_string()))?;
    Ok(Box::new(ArloPolicy::new(name, config, ServiceModel::new(profile, slo))))
}

/// OTAS's plan list with each plan's latency profile (`plain`: the deployment's) and accuracy.
fn plan_table(name: &str, config: &OtasConfig, ctx: &Context) -> Result<PlanTable, PolicyError> {
    let entries = config.plans.iter().map(|&plan| {
        let latency = match plan {
            TokenPlan::Plain => ctx.profile.clone().or_else(|| ctx.plans.get(&TokenPlan::Plain).cloned()),
            _ => ctx.plans.get(&plan).cloned(),
        };
        let latency =
            latency.ok_or_else(|| PolicyError::NeedsPlanProfile { name: name.to_string(), plan })?;
        let accuracy = match (config.accuracy.get(&plan), ctx.accuracy.get(&plan)) {
            (Some(given), _) | (None, Some(given)) => given.clone(),
            // One plan: its accuracy scales every choice alike.
            (None, None) if config.plans.len() == 1 => vec![1.0],
            (None, None) => return Err(PolicyError::NeedsAccuracy { name: name.to_string(), plan }),
        };
        Ok(PlanEntry { plan, latency, accuracy })
    });
    let entries = entries.collect::<Result<Vec<_>, PolicyError>>()?;
    PlanTable::new(entries)
        .map_err(|why| PolicyError::Params { name: name.to_string(), source: serde::de::Error::custom(why) })
}

/// Whether policy `name` schedules generations on whole decoders (FCFS, SSJF).
pub fn runs_whole_decoders(name: &str) -> bool {
    SsjfConfig::preset(name).is_some()
}

/// A pipeline policy: its sizer and pool settings from `params` over the sizer's defaults.
fn build_pipeline(
    name: &str,
    params: &serde_json::Value,
    ctx: &Context,
) -> Result<Box<dyn Policy>, PolicyError> {
    let params_err = |source| PolicyError::Params { name: name.to_string(), source };
    let pipeline = ctx.pipeline.clone().ok_or_else(|| PolicyError::NeedsPipeline(name.to_string()))?;
    let slo = ctx.slo.ok_or_else(|| PolicyError::NeedsSlo(name.to_string()))?;
    let hosts = ctx.hosts.clone().unwrap_or_else(|| HostSlots::new(1, u16::MAX));

    let on = |pool: PoolConfig, slo: Nanos| (name, pool, (*pipeline).clone(), hosts.clone(), slo);
    Ok(match name {
        "quart" => {
            let c: QuartConfig = with_nested_params(QuartConfig::default(), params).map_err(params_err)?;
            let slo = c.slo_ms.map_or(slo, ms_to_nanos);
            boxed(on(c.pool.clone(), slo), QuartSizer::new(c))
        }
        "infless-like" => {
            let c: InflessConfig =
                with_nested_params(InflessConfig::default(), params).map_err(params_err)?;
            boxed(on(c.pool.clone(), slo), InflessSizer(c))
        }
        "inferline-like" => {
            let c: InferlineConfig =
                with_nested_params(InferlineConfig::default(), params).map_err(params_err)?;
            boxed(on(c.pool.clone(), slo), InferlineSizer(c))
        }
        "cocktail-like" => {
            let c: CocktailConfig =
                with_nested_params(CocktailConfig::default(), params).map_err(params_err)?;
            boxed(on(c.pool.clone(), slo), CocktailSizer::new(c))
        }
        _ => {
            let c: UniformConfig =
                with_nested_params(UniformConfig::default(), params).map_err(params_err)?;
            boxed(on(c.pool.clone(), slo), UniformSizer(c))
        }
    })
}

/// A pipeline policy named `name` with `pool` settings on `pipeline` and `hosts` under `slo`.
fn boxed<S: Sizer + 'static>(
    (name, pool, pipeline, hosts, slo): (&str, PoolConfig, StageTimes, HostSlots, Nanos),
    sizer: S,
) -> Box<dyn Policy> {
    Box::new(PipelinePolicy::new(name, pool, pipeline, &hosts, slo, sizer))
}

/// `preset` with the fields of `params` replacing its own (a nested table replaces the preset's
/// whole: SSJF's `batching` modes take different keys).
fn with_params<T: serde::Serialize + serde::de::DeserializeOwned>(
    preset: T,
    params: &serde_json::Value,
) -> Result<T, serde_json::Error> {
    let mut merged = serde_json::to_value(preset)?;
    merge(&mut merged, params, false);
    serde_json::from_value(merged)
}

/// `preset` with `params` written over it table by table: a pipeline policy's `pool` table names
/// only the settings it changes, the rest stay the policy's own.
fn with_nested_params<T: serde::Serialize + serde::de::DeserializeOwned>(
    preset: T,
    params: &serde_json::Value,
) -> Result<T, serde_json::Error> {
    let mut merged = serde_json::to_value(preset)?;
    merge(&mut merged, params, true);
    serde_json::from_value(merged)
}

fn merge(into: &mut serde_json::Value, from: &serde_json::Value, nested: bool) {
    match (into.as_object_mut(), from.as_object()) {
        (Some(into), Some(from)) => {
            for (k, v) in from {
                match into.get_mut(k) {
                    Some(slot) if nested && slot.is_object() && v.is_object() => merge(slot, v, true),
                    _ => {
                        into.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        _ => *into = from.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use morph_core::Point;

    #[test]
    fn builds_known_policies_and_rejects_the_rest() {
        let none = Context::default();
        let p = build("dynamic-batching", &json!({"max_queue": 7}), &none).unwrap();
        assert_eq!(p.describe()["max_queue"], 7);
        assert_eq!(p.describe()["max_batch_tokens"], 16_384);
        assert!(matches!(build("fifo", &json!({}), &none), Err(PolicyError::Unknown(_))));
        assert!(matches!(
            build("dynamic-batching", &json!({"max_queu": 1}), &none),
            Err(PolicyError::Params { .. })
        ));
        assert!(matches!(build("arlo", &json!({}), &none), Err(PolicyError::NeedsProfile(_))));
        let profile = Arc::new(
            LatencyProfile::from_points(
                "m",
                [Point { batch: 1, len: 64, ms: 1.0 }, Point { batch: 1, len: 512, ms: 4.0 }],
            )
            .unwrap(),
        );
        let ctx = Context { profile: Some(profile), ..Context::default() };
        assert!(matches!(build("arlo", &json!({}), &ctx), Err(PolicyError::NeedsSlo(_))));
        let st = build("st", &json!({"slo_ms": 50}), &ctx).unwrap();
        assert_eq!(st.describe()["runtimes"][0]["runtime"], "fixed:512x1");
        let arlo =
            build("arlo", &json!({"slo_ms": 50, "max_lens": [64, 512], "runtime_set": "explicit"}), &ctx);
        assert_eq!(arlo.unwrap().describe()["runtimes"].as_array().unwrap().len(), 2);
        assert!(matches!(build("arlo", &json!({"lambda": "x"}), &ctx), Err(PolicyError::Params { .. })));
        let ssjf =
            build("ssjf", &json!({"batching": {"mode": "dynamic", "max_batch": 4, "wait_ms": 50}}), &none);
        assert_eq!(ssjf.unwrap().describe()["batching"]["max_batch"], 4);
        assert_eq!(build("fcfs", &json!({}), &none).unwrap().name(), "fcfs/continuous-b4");
    }

    #[test]
    fn pipeline_policies_need_a_pipeline_and_keep_their_own_pool_settings() {
        let slo = Some(50_000_000);
        assert!(matches!(
            build("quart", &json!({}), &Context { slo, ..Context::default() }),
            Err(PolicyError::NeedsPipeline(_))
        ));
        let pipeline = Arc::new(morph_core::StageTimes {
            runtime: morph_core::RuntimeSpec::fixed(128, 1),
            layers: 4,
            stages: vec![morph_core::StageTime::amdahl(2.0, 1.0); 2],
            hop_ms: 0.0,
        });
        let ctx = Context { slo, pipeline: Some(pipeline), ..Context::default() };
        // A `pool` table changes only what it names: INFless-like stays whole-model.
        let infless = build("infless-like", &json!({"pool": {"max_batch": 2}}), &ctx).unwrap();
        assert_eq!(infless.describe()["pool"]["whole_model"], true);
        assert_eq!(infless.describe()["pool"]["max_batch"], 2);
        let quart = build("quart", &json!({"gains": {"kp": 1.0}}), &ctx).unwrap();
        assert_eq!(quart.describe()["sizer"]["gains"]["ki"], 0.3);
        assert_eq!(quart.layout(8).unwrap().len(), 2, "one replica per stage");
        assert!(matches!(
            build("quart", &json!({"pool": {"max_bach": 2}}), &ctx),
            Err(PolicyError::Params { .. })
        ));
    }
}
