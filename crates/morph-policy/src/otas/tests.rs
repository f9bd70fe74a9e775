//! The OTAS policy driven by hand-made events: eviction, admission, which rule plans, and the
//! PetS-like preset.

use std::sync::Arc;

use morph_core::fixtures::{flat_profile, request};
use morph_core::{
    Action, DropReason, Event, HostId, InstanceId, InstanceInfo, LatencyProfile, Policy, PromptMode,
    RequestInfo, RuntimeSpec, ServiceClass, TaskId, Time, TokenPlan, UnitSpec,
};
use serde_json::json;

use crate::registry::{Context, build};

const MERGE_2: TokenPlan = TokenPlan::Merge(2);
const PROMPT_2: TokenPlan = TokenPlan::Prompt(2, PromptMode::Additive);

/// A profile whose every batch takes `ms`.
fn flat(plan: TokenPlan, ms: f64) -> Arc<LatencyProfile> {
    let mut profile = flat_profile(ms, 64);
    profile.plan = Some(plan);
    Arc::new(profile)
}

/// `name` over two plans: merge:2 (10 ms a batch, accuracy 0.8) and prompt:2 (30 ms, 0.9).
fn policy(name: &str, params: serde_json::Value) -> Box<dyn Policy> {
    let mut ctx = Context::default();
    ctx.plans.insert(MERGE_2, flat(MERGE_2, 10.0));
    ctx.plans.insert(PROMPT_2, flat(PROMPT_2, 30.0));
    ctx.profile = Some(flat(TokenPlan::Plain, 20.0));
    let mut p = build(name, &params, &ctx).expect("an OTAS policy");
    let unit = UnitSpec::batch(RuntimeSpec::dynamic(128, 64));
    let up = Event::InstanceUp {
        instance: InstanceInfo { id: InstanceId(0), unit, host: HostId(0) },
        launch: None,
    };
    p.on_event(Time::ZERO, up, &mut Vec::new());
    p
}

fn two_plans() -> Box<dyn Policy> {
    policy(
        "otas",
        json!({ "plans": ["merge:2", "prompt:2"], "accuracy": { "merge:2": [0.8], "prompt:2": [0.9] } }),
    )
}

fn ms(ms: f64) -> Time {
    Time::from_millis_f64(ms)
}

fn arrival(id: u64, at_ms: f64, slo_ms: f64) -> Event {
    let service =
        ServiceClass { task: TaskId(0), deadline: Some(ms(at_ms + slo_ms)), utility_micros: 300_000 };
    Event::Arrival(RequestInfo { service: Some(service), ..request(id, 20, ms(at_ms)) })
}

fn done() -> Event {
    Event::BatchDone { instance: InstanceId(0), requests: Vec::new(), failed: false, computed: None }
}

/// The runs in `actions`: (requests, plan).
fn runs(actions: &[Action]) -> Vec<(Vec<u64>, TokenPlan)> {
    let run = |a: &Action| match a {
        Action::Run { requests, plan, .. } => Some((requests.iter().map(|r| r.0).collect(), plan.tokens)),
        _ => None,
    };
    actions.iter().filter_map(run).collect()
}

fn drops(actions: &[Action]) -> Vec<u64> {
    let drop = |a: &Action| match a {
        Action::Drop { request, reason: DropReason::DeadlineUnreachable { .. } } => Some(request.0),
        _ => None,
    };
    actions.iter().filter_map(drop).collect()
}

#[test]
fn a_doomed_request_is_evicted_once_and_the_rest_of_its_batch_runs() {
    let mut p = two_plans();
    let mut out = Vec::new();
    p.on_event(ms(0.0), arrival(1, 0.0, 100.0), &mut out);
    // Idle, a short queue, a low rate: Alg. 3 gives it the most accurate plan at once.
    assert_eq!(runs(&out), [(vec![1], PROMPT_2)]);
    // While it runs, two arrive that batch together; request 2's deadline is 45 ms.
    p.on_event(ms(5.0), arrival(2, 5.0, 40.0), &mut out);
    p.on_event(ms(6.0), arrival(3, 6.0, 400.0), &mut out);
    assert_eq!(p.queue_len(), 2);
    out.clear();
    // Free at 40 ms: 40 + 10 ≥ 45, so request 2 is evicted; request 3 runs.
    p.on_event(ms(40.0), done(), &mut out);
    assert_eq!(drops(&out), [2]);
    assert_eq!(runs(&out).len(), 1);
    assert_eq!(runs(&out)[0].0, [3]);
    let mut later = Vec::new();
    p.on_event(ms(80.0), done(), &mut later);
    p.on_event(ms(2_000.0), done(), &mut later);
    assert!(drops(&later).is_empty() && runs(&later).is_empty(), "answered once: {later:?}");
    assert_eq!(p.queue_len(), 0);
}

#[test]
fn a_deadline_impossible_at_arrival_is_refused_at_once_and_names_it() {
    let mut p = two_plans();
    let mut out = Vec::new();
    p.on_event(ms(0.0), arrival(1, 0.0, 5.0), &mut out);
    assert_eq!(drops(&out), [1]);
    let Action::Drop { reason, .. } = &out[0] else { unreachable!() };
    assert!(reason.to_string().contains("deadline (5 ms after arrival)"), "{reason}");
    assert!(runs(&out).is_empty());
}

/// Eight single-request batches queued behind a busy engine, after the initial stage: the DP
/// plans them. With room to spare the first gets the accurate plan; when only the fast plan
/// lets every batch meet its deadline, the first gets the fast plan.
#[test]
fn past_the_initial_stage_a_long_queue_is_planned_by_the_dp() {
    for (slack_ms, expect) in [(10_000.0, PROMPT_2), (0.0, MERGE_2)] {
        let mut p = two_plans();
        let mut out = Vec::new();
        p.on_event(ms(0.0), arrival(100, 0.0, 100_000.0), &mut out);
        assert_eq!(runs(&out).len(), 1);
        // Arrivals 600 ms apart (> δ) open their own batches; batch k's deadline is
        // 5 s + 10 (k + 1) + 5 ms, plus the slack.
        for k in 0..8u64 {
            let at = 600.0 * k as f64;
            let deadline = 5_000.0 + 10.0 * (k + 1) as f64 + 5.0 + slack_ms;
            p.on_event(ms(at), arrival(k, at, deadline - at), &mut out);
        }
        out.clear();
        p.on_event(ms(5_000.0), done(), &mut out);
        assert_eq!(runs(&out), [(vec![0], expect)], "slack {slack_ms} ms");
        let dp = p
            .gauges()
            .iter()
            .any(|g| g.name == "otas_decisions_total" && g.labels[0].1 == "dp" && g.value == 1.0);
        assert!(dp, "{:?}", p.gauges());
    }
}

#[test]
fn pets_like_runs_its_one_plan_and_never_skips() {
    let mut p = policy("pets-like", json!({}));
    let mut out = Vec::new();
    p.on_event(ms(0.0), arrival(1, 0.0, 1_000.0), &mut out);
    assert_eq!(runs(&out), [(vec![1], TokenPlan::Plain)]);
    assert!(build("pets-like", &json!({ "plans": ["merge:2", "prompt:2"] }), &Context::default()).is_err());
    let fixed = policy("pets-like", json!({ "plans": ["merge:2"] }));
    assert_eq!(fixed.describe()["config"]["plans"], json!(["merge:2"]));
}

#[test]
fn a_plan_without_a_profile_or_an_accuracy_is_a_clear_error() {
    let ctx = Context { profile: Some(flat(TokenPlan::Plain, 20.0)), ..Context::default() };
    let err = build(
        "otas",
        &json!({ "plans": ["merge:3", "plain"], "accuracy": { "merge:3": [0.8], "plain": [0.9] } }),
        &ctx,
    )
    .err()
    .expect("no profile for plan merge:3");
    assert!(err.to_string().contains("token plan merge:3"), "{err}");
    let mut ctx = ctx;
    ctx.plans.insert(TokenPlan::Merge(3), flat(TokenPlan::Merge(3), 10.0));
    let err = build("otas", &json!({ "plans": ["merge:3", "plain"] }), &ctx).err().expect("no accuracy");
    assert!(err.to_string().contains("token plan merge:3, which has no accuracy"), "{err}");
}

/// INFaaS-like: the most accurate variant while the rate is low; a faster one once the rate
/// has stayed above the accurate one's throughput for the hold time, after a switch during
/// which nothing runs.
#[test]
fn infaas_like_switches_to_a_faster_variant_after_the_hold_and_pays_the_switch() {
    let mut ctx = Context::default();
    ctx.plans.insert(MERGE_2, flat(MERGE_2, 100.0));
    ctx.plans.insert(PROMPT_2, flat(PROMPT_2, 3_000.0)); // 64 rows in 3 s: about 21 req/s
    let params = json!({ "plans": ["merge:2", "prompt:2"], "accuracy": { "merge:2": [0.8], "prompt:2": [0.9] },
        "switching": { "hold_ms": 1000.0, "cost_ms": 250.0 } });
    let mut p = build("infaas-like", &params, &ctx).expect("infaas-like");
    let unit = UnitSpec::batch(RuntimeSpec::dynamic(128, 64));
    let up = Event::InstanceUp {
        instance: InstanceInfo { id: InstanceId(0), unit, host: HostId(0) },
        launch: None,
    };
    p.on_event(Time::ZERO, up, &mut Vec::new());
    let mut plans = Vec::new();
    // 100 req/s for 7 s, the engine free again at 3 s and 6 s, ticks every 10 ms.
    for step in 0..=700u64 {
        let at = step as f64 * 10.0;
        let mut out = Vec::new();
        p.on_event(ms(at), arrival(step, at, 100_000.0), &mut out);
        if step == 300 || step == 600 {
            p.on_event(ms(at), done(), &mut out);
        }
        p.on_event(ms(at), Event::Tick, &mut out);
        plans.extend(runs(&out).into_iter().map(|(_, plan)| (at, plan)));
    }
    // The accurate variant at 0 and 3 s (the faster choice first seen at 3 s has not held a
    // second yet); at 6 s it has, so the switch starts and the next batch runs 250 ms later.
    assert_eq!(plans, [(0.0, PROMPT_2), (3_000.0, PROMPT_2), (6_250.0, MERGE_2)]);
}
