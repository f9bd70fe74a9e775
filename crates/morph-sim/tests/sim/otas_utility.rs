//! OTAS in the simulator: the utility account by hand on four requests, and the shipped
//! scenario on the profiles measured for Morph (`assets/profiles/otas`).

use std::path::Path;
use std::sync::Arc;

use morph_core::fixtures::flat_profile;
use morph_core::{LatencyProfile, RuntimeSpec, ServiceClass, TaskId, Time, TokenPlan, UnitSpec};
use morph_policy::registry::{Context, build};
use morph_sim::workload::Correctness;
use morph_sim::{ProfileCost, Scenario, SimOptions, SimRequest, simulate};
use serde_json::json;

/// A profile in which every batch takes 100 ms.
fn flat() -> LatencyProfile {
    flat_profile(100.0, 64)
}

fn write_profile(dir: &Path) {
    std::fs::create_dir_all(dir.join("correctness")).expect("profile folder");
    let accuracy = json!({ "plans": ["plain"], "tasks": ["t"], "profiling": { "plain": [0.5] }, "test": { "plain": [0.66] } });
    std::fs::write(dir.join("accuracy.json"), accuracy.to_string()).expect("accuracy.json");
    let lines =
        ["{\"len\":10,\"correct\":[1]}", "{\"len\":10,\"correct\":[0]}", "{\"len\":12,\"correct\":[1]}"];
    std::fs::write(dir.join("correctness/t.jsonl"), lines.join("\n")).expect("correctness");
}

fn request(at_ms: f64, slo_ms: f64, utility: f64, example: u32) -> SimRequest {
    let service = ServiceClass {
        task: TaskId(0),
        deadline: Some(Time::from_millis_f64(at_ms + slo_ms)),
        utility_micros: (utility * 1e6) as u32,
    };
    SimRequest { service: Some(service), example, ..SimRequest::new(Time::from_millis_f64(at_ms), 10, 0) }
}

/// Four requests on one instance whose batches take 100 ms (PetS-like):
/// - r0 (at 0, SLO 500 ms, example right) runs alone 0–100 ms: type 1, earns 1.0;
/// - r1 (at 1 ms, SLO 500 ms, example wrong) and r2 (at 1 ms, SLO 150 ms) form the next batch;
///   at 100 ms r2 cannot end before 151 (100 + 100), so it is evicted (type 4) and r1 runs
///   100–200: type 2;
/// - r3 (at 1 ms, SLO 50 ms) cannot be met even alone: refused at arrival, type 4.
#[test]
fn utility_and_outcome_types_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    write_profile(dir.path());
    let table = Arc::new(Correctness::load(dir.path()).unwrap());
    let requests = [
        request(0.0, 500.0, 1.0, 0),
        request(1.0, 500.0, 0.5, 1),
        request(1.0, 150.0, 0.25, 2),
        request(1.0, 50.0, 0.125, 0),
    ];
    let ctx = Context { profile: Some(Arc::new(flat())), ..Context::default() };
    let policy = build("pets-like", &json!({}), &ctx).unwrap();
    let cluster = [UnitSpec::batch(RuntimeSpec::dynamic(128, 32))];
    let options = SimOptions { correctness: Some(table), ..SimOptions::default() };
    let report = simulate(policy, &cluster, &ProfileCost::new(flat(), 1.0), requests, &options);
    let u = report.utility.expect("a utility account");
    assert_eq!(u.utility, 1.0);
    assert_eq!(u.attainable, 1.875);
    assert_eq!(u.types, [0.25, 0.25, 0.0, 0.5]);
    assert_eq!(u.batches_by_plan.get(&TokenPlan::Plain), Some(&2));
    assert_eq!(u.mean_batch_accuracy, 0.5);
}

fn shipped() -> Scenario {
    let path = morph_assets::path("scenarios/otas_synthetic_cpu.toml");
    let mut s = Scenario::load(&path, &|t| Ok(t.split_whitespace().count() as u32 + 2)).expect("scenario");
    s.duration_s = 60.0;
    s
}

/// On the measured profiles, over a minute of the fluctuating load: every run's outcome types
/// add up, each policy runs only its own plans, and OTAS over the Pareto plans earns more than
/// the PetS-like baseline (the same stream, the same seed: a deterministic comparison).
#[test]
fn otas_earns_more_than_pets_like_on_the_shipped_scenario() {
    let rows = shipped().run(&mut |_, _| {}).expect("run");
    let utility = |label: &str| {
        let row = rows.iter().find(|r| r.report.policy == label).unwrap_or_else(|| panic!("{label}"));
        row.report.utility.as_ref().expect("a utility account").utility
    };
    for row in &rows {
        let u = row.report.utility.as_ref().expect("a utility account");
        assert!((u.types.iter().sum::<f64>() - 1.0).abs() < 1e-9, "{}", row.report.policy);
        let plans = row.report.policy_state["config"]["plans"].as_array().expect("plans").clone();
        for plan in u.batches_by_plan.keys() {
            assert!(plans.contains(&json!(plan)), "{} ran plan {plan}", row.report.policy);
        }
    }
    assert!(utility("otas (pareto)") > utility("pets-like"));
}
