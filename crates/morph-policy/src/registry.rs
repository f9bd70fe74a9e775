//! Policies by name, with parameters from a scenario file or the command line.

use std::sync::Arc;

use morph_core::{Nanos, Policy, Profile, time::ms_to_nanos};

use crate::arlo::ServiceModel;
use crate::fleet::{FleetConfig, FleetPolicy, PRESETS};
use crate::ssjf::{SsjfConfig, SsjfPolicy};
use crate::{DynamicBatching, DynamicBatchingConfig};

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("unknown policy '{0}' (known: dynamic-batching, ssjf, fcfs, {PRESETS:?})")]
    Unknown(String),
    #[error("parameters of policy '{name}': {source}")]
    Params { name: String, source: serde_json::Error },
    #[error("policy '{0}' needs a latency profile (a scenario's cluster.profile, or --profile)")]
    NeedsProfile(String),
    #[error("policy '{0}' needs an SLO (slo_ms in the scenario or the policy, or --slo-ms)")]
    NeedsSlo(String),
}

/// What a policy may take from the deployment it runs in.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// The instances' latency profile.
    pub profile: Option<Arc<Profile>>,
    /// The deployment's latency SLO.
    pub slo: Option<Nanos>,
}

/// Builds the policy `name` from `params` (a JSON object of its config fields; missing fields
/// take the preset's values, unknown ones are an error).
pub fn build(name: &str, params: &serde_json::Value, ctx: &Context) -> Result<Box<dyn Policy>, PolicyError> {
    let params_err = |source| PolicyError::Params { name: name.to_string(), source };
    if name == "dynamic-batching" {
        let config: DynamicBatchingConfig = serde_json::from_value(params.clone()).map_err(params_err)?;
        return Ok(Box::new(DynamicBatching::new(config)));
    }
    if let Some(preset) = SsjfConfig::preset(name) {
        let config: SsjfConfig = with_params(preset, params).map_err(params_err)?;
        return Ok(Box::new(SsjfPolicy::new(config)));
    }
    let preset = FleetConfig::preset(name).ok_or_else(|| PolicyError::Unknown(name.to_string()))?;
    let config: FleetConfig = with_params(preset, params).map_err(params_err)?;
    let profile = ctx.profile.clone().ok_or_else(|| PolicyError::NeedsProfile(name.to_string()))?;
    let slo =
        config.slo_ms.map(ms_to_nanos).or(ctx.slo).ok_or_else(|| PolicyError::NeedsSlo(name.to_string()))?;
    Ok(Box::new(FleetPolicy::new(name, config, ServiceModel::new(profile, slo))))
}

/// `preset` with the fields of `params` replacing its own.
fn with_params<T: serde::Serialize + serde::de::DeserializeOwned>(
    preset: T,
    params: &serde_json::Value,
) -> Result<T, serde_json::Error> {
    let mut merged = serde_json::to_value(preset)?;
    if let (Some(into), Some(from)) = (merged.as_object_mut(), params.as_object()) {
        for (k, v) in from {
            into.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(merged)
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
            Profile::from_points(
                "m",
                [Point { batch: 1, len: 64, ms: 1.0 }, Point { batch: 1, len: 512, ms: 4.0 }],
            )
            .unwrap(),
        );
        let ctx = Context { profile: Some(profile), slo: None };
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
}
