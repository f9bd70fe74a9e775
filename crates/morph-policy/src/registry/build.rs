//! How each family of policies is built from its parameters and the deployment's context.

use morph_core::{HostSlots, Nanos, Policy, StageTimes, TokenPlan, time::Millis};

use super::{Context, PolicyError, PolicyKind};
use crate::arlo::{ArloConfig, ArloPolicy, ServiceModel};
use crate::otas::{OtasConfig, OtasPolicy, PlanEntry, PlanTable};
use crate::pipeline::{PipelinePolicy, PoolConfig, Sizer};
use crate::quart::baselines::cocktail::{CocktailConfig, CocktailSizer};
use crate::quart::baselines::inferline::{InferlineConfig, InferlineSizer};
use crate::quart::baselines::infless::{InflessConfig, InflessSizer};
use crate::quart::baselines::uniform::{UniformConfig, UniformSizer};
use crate::quart::{QuartConfig, QuartSizer};
use crate::ssjf::{SsjfConfig, SsjfPolicy};
use crate::{DynamicBatching, DynamicBatchingConfig};

/// Builds the policy of a name from its parameters in a context.
pub(super) type Builder = fn(&str, &serde_json::Value, &Context) -> Result<Box<dyn Policy>, PolicyError>;

/// A parameter error of policy `name`.
fn params_err(name: &str) -> impl Fn(serde_json::Error) -> PolicyError + '_ {
    move |source| PolicyError::Params { name: name.to_string(), source }
}

pub(super) fn dynamic_batching(
    name: &str,
    params: &serde_json::Value,
    context: &Context,
) -> Result<Box<dyn Policy>, PolicyError> {
    let config: DynamicBatchingConfig = serde_json::from_value(params.clone()).map_err(params_err(name))?;
    config.check().map_err(|why| params_err(name)(serde::de::Error::custom(why)))?;
    let refined = config.refine_every > 0;
    let policy = DynamicBatching::new(config);
    match (refined, &context.profile) {
        (false, _) => Ok(Box::new(policy)),
        (true, Some(profile)) => Ok(Box::new(policy.refined_from(profile, context.refits.clone()))),
        (true, None) => Err(params_err(name)(serde::de::Error::custom(
            "refine_every refines buckets planned from a profile; give the profile (--profile)",
        ))),
    }
}

pub(super) fn ssjf(
    name: &str,
    params: &serde_json::Value,
    ctx: &Context,
) -> Result<Box<dyn Policy>, PolicyError> {
    if PolicyKind::find(name)?.needs.generation_costs && ctx.generation.is_none() {
        return Err(PolicyError::NeedsGenerationCosts(name.to_string()));
    }
    let preset =
        SsjfConfig::preset(name, ctx.generation).ok_or_else(|| PolicyError::Unknown(name.to_string()))?;
    let config: SsjfConfig = with_params(preset, params).map_err(params_err(name))?;
    Ok(Box::new(SsjfPolicy::new(config, ctx.step)))
}

pub(super) fn otas(
    name: &str,
    params: &serde_json::Value,
    ctx: &Context,
) -> Result<Box<dyn Policy>, PolicyError> {
    let preset = OtasConfig::preset(name).ok_or_else(|| PolicyError::Unknown(name.to_string()))?;
    let config: OtasConfig = with_nested_params(preset, params).map_err(params_err(name))?;
    config.check(name).map_err(|why| params_err(name)(serde::de::Error::custom(why)))?;
    let table = plan_table(name, &config, ctx)?;
    Ok(Box::new(OtasPolicy::new(name, config, table)))
}

pub(super) fn arlo(
    name: &str,
    params: &serde_json::Value,
    ctx: &Context,
) -> Result<Box<dyn Policy>, PolicyError> {
    let preset = ArloConfig::preset(name).ok_or_else(|| PolicyError::Unknown(name.to_string()))?;
    let config: ArloConfig = with_params(preset, params).map_err(params_err(name))?;
    config.check().map_err(|why| params_err(name)(serde::de::Error::custom(why)))?;
    let profile = ctx.profile.clone().ok_or_else(|| PolicyError::NeedsProfile(name.to_string()))?;
    let slo = config
        .slo_ms
        .map(Millis::nanos)
        .or(ctx.slo)
        .ok_or_else(|| PolicyError::NeedsSlo(name.to_string()))?;
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

/// A pipeline policy: its sizer and pool settings from `params` over the sizer's defaults.
pub(super) fn pipeline(
    name: &str,
    params: &serde_json::Value,
    ctx: &Context,
) -> Result<Box<dyn Policy>, PolicyError> {
    let params_err = params_err(name);
    let pipeline = ctx.pipeline.clone().ok_or_else(|| PolicyError::NeedsPipeline(name.to_string()))?;
    let slo = ctx.slo.ok_or_else(|| PolicyError::NeedsSlo(name.to_string()))?;
    let hosts = ctx.hosts.clone().unwrap_or_else(|| HostSlots::new(1, u16::MAX));

    let on = |pool: PoolConfig, slo: Nanos| (name, pool, (*pipeline).clone(), hosts.clone(), slo);
    Ok(match name {
        "quart" => {
            let c: QuartConfig = with_nested_params(QuartConfig::default(), params).map_err(params_err)?;
            let slo = c.slo_ms.map_or(slo, Millis::nanos);
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
