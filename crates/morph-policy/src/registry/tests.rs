//! The registry driven by hand: known policies build with their parameters and context, the
//! rest are refused by name.

use std::sync::Arc;

use morph_core::{LatencyProfile, Point, TokenPlan};
use serde_json::json;

use super::*;

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
    // Refined buckets need the profile they were planned from.
    let refined = json!({"refine_every": 64});
    let refusal = build("dynamic-batching", &refined, &none).err().expect("refused").to_string();
    assert!(refusal.contains("refine_every refines buckets planned from a profile"), "{refusal}");
    assert_eq!(build("dynamic-batching", &refined, &ctx).unwrap().describe()["bucket_refits"], 0);
    assert!(matches!(build("arlo", &json!({}), &ctx), Err(PolicyError::NeedsSlo(_))));
    let st = build("st", &json!({"slo_ms": 50}), &ctx).unwrap();
    assert_eq!(st.describe()["runtimes"][0]["runtime"], "fixed:512x1");
    let arlo = build("arlo", &json!({"slo_ms": 50, "max_lens": [64, 512], "runtime_set": "explicit"}), &ctx);
    assert_eq!(arlo.unwrap().describe()["runtimes"].as_array().unwrap().len(), 2);
    assert!(matches!(build("arlo", &json!({"lambda": "x"}), &ctx), Err(PolicyError::Params { .. })));
    // A switch that would do nothing without the one it builds on is refused by name.
    for (params, named) in [
        (json!({"slo_ms": 50, "late_binding": false}), "dynamic_fallback needs late_binding"),
        (json!({"slo_ms": 50, "dynamic_fallback": false}), "pooled_backlog needs dynamic_fallback"),
    ] {
        let refusal = build("arlo", &params, &ctx).err().expect("refused").to_string();
        assert!(refusal.contains(named), "{refusal}");
    }
    assert!(matches!(build("ssjf", &json!({}), &none), Err(PolicyError::NeedsGenerationCosts(_))));
    let costs = Context { generation: Some(GENERATION), ..Context::default() };
    let ssjf =
        build("ssjf", &json!({"batching": {"mode": "dynamic", "max_batch": 4, "wait_ms": 50}}), &costs);
    assert_eq!(ssjf.unwrap().describe()["batching"]["max_batch"], 4);
    assert_eq!(build("fcfs", &json!({}), &none).unwrap().name(), "fcfs/continuous-b4");
}

/// A decoder's costs: a 20 ms step, a prompt token's prefill 5 ms.
const GENERATION: GenerationCosts = GenerationCosts { step_ms: 20.0, prefill_token_ms: Some(5.0) };

#[test]
fn ssjf_weighs_and_ages_jobs_by_the_deployments_generation_costs() {
    let ctx = Context { generation: Some(GENERATION), ..Context::default() };
    let ssjf = build("ssjf", &json!({}), &ctx).unwrap().describe();
    assert_eq!(ssjf["aging"]["token_ms"], 20.0);
    assert_eq!(ssjf["prefill_weight"], 0.25);
    // Under a constant prefill no prompt token weighs anything; a parameter given still wins.
    let constant = GenerationCosts { prefill_token_ms: None, ..GENERATION };
    let ctx = Context { generation: Some(constant), ..Context::default() };
    let ssjf = build("ssjf", &json!({"aging": {"factor": 2.0, "token_ms": 7.0}}), &ctx).unwrap().describe();
    assert_eq!((ssjf["prefill_weight"].as_f64(), ssjf["aging"]["token_ms"].as_f64()), (Some(0.0), Some(7.0)));
    assert!(build("fcfs", &json!({}), &ctx).unwrap().describe()["aging"].is_null());
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

/// A context every policy's needs are met in: a profile, an SLO, a pipeline, a profile and an
/// accuracy for every plan a preset plans with, and a decoder's costs.
fn full_context() -> Context {
    const PRESET_PLANS: [TokenPlan; 3] = [TokenPlan::Plain, TokenPlan::Exit(3), TokenPlan::Exit(4)];
    let profile = Arc::new(
        LatencyProfile::from_points(
            "m",
            [Point { batch: 1, len: 64, ms: 1.0 }, Point { batch: 8, len: 512, ms: 4.0 }],
        )
        .unwrap(),
    );
    let pipeline = Arc::new(morph_core::StageTimes {
        runtime: morph_core::RuntimeSpec::fixed(128, 1),
        layers: 4,
        stages: vec![morph_core::StageTime::amdahl(2.0, 1.0); 2],
        hop_ms: 0.0,
    });
    Context {
        profile: Some(profile.clone()),
        slo: Some(50_000_000),
        pipeline: Some(pipeline),
        plans: PRESET_PLANS.into_iter().map(|p| (p, profile.clone())).collect(),
        accuracy: PRESET_PLANS.into_iter().map(|p| (p, vec![0.9])).collect(),
        generation: Some(GENERATION),
        ..Context::default()
    }
}

#[test]
fn every_listed_policy_builds_once_its_needs_are_met_and_names_are_unique() {
    let ctx = full_context();
    for kind in POLICIES {
        let policy = kind.build(&json!({}), &ctx).unwrap_or_else(|e| panic!("{}: {e}", kind.name));
        assert!(policy.name().starts_with(kind.name), "{} built {}", kind.name, policy.name());
        assert_eq!(POLICIES.iter().filter(|p| p.name == kind.name).count(), 1, "{} twice", kind.name);
        assert_eq!(kind.needs.stages, kind.family == Family::Pipeline, "{}", kind.name);
    }
    let unknown = PolicyKind::find("fifo").unwrap_err().to_string();
    assert!(
        unknown.contains("dynamic-batching") && unknown.contains("quart") && unknown.contains("pets-like"),
        "{unknown}"
    );
}
