//! Arlo's policy in virtual time: allocation follows the lengths, replacements and scaling
//! lose no request, launched instances pay their start-up delay, and Morph's robust form holds
//! the SLO near saturation where the paper's form does not.

use std::sync::Arc;

use morph_core::{LatencyProfile, Nanos, Point, Policy, time::ms_to_nanos};
use morph_policy::registry::{Context, build};
use morph_sim::cost::Startup;
use morph_sim::workload::{Arrivals, Lengths};
use morph_sim::{ProfileCost, Report, SimOptions, Workload, simulate};
use serde_json::json;

/// A 64-token staircase: 1 ms up to 64 tokens, +0.5 ms per step, profiled to 512.
fn stairs() -> LatencyProfile {
    let points = (0..32).map(|i| Point { batch: 1, len: 1 + i * 16, ms: 1.0 + 0.5 * f64::from(i * 16 / 64) });
    LatencyProfile::from_points("stairs", points.chain([Point { batch: 1, len: 512, ms: 4.5 }]))
        .expect("a valid profile")
}

fn policy(name: &str, params: serde_json::Value) -> Box<dyn Policy> {
    let ctx =
        Context { profile: Some(Arc::new(stairs())), slo: Some(ms_to_nanos(20.0)), ..Context::default() };
    build(name, &params, &ctx).expect("a known policy")
}

fn run(policy: Box<dyn Policy>, slots: usize, workload: Workload, seconds: f64, startup: Nanos) -> Report {
    let requests = workload.generate(seconds, 3).expect("a workload");
    let cost = ProfileCost::new(stairs(), 1.0);
    let layout = policy.layout(slots).expect("fleet policies lay out their runtimes");
    let options = SimOptions { startup: Startup { cold: startup, warm: startup }, ..SimOptions::default() };
    let report = simulate(policy, &layout, &cost, requests.iter().copied(), &options);
    assert_eq!(report.measured.requests, requests.len());
    assert_eq!(
        report.measured.completed + report.measured.dropped,
        report.measured.requests,
        "every request answered once"
    );
    report
}

#[test]
fn allocation_moves_instances_to_the_runtimes_the_lengths_need() {
    // Nearly all requests are short: after the first allocation, the 64-token runtime holds
    // most instances, the 512 one keeps at least one (Eq. 7).
    let workload = Workload {
        arrivals: Arrivals::Poisson { rate: 2_000.0 },
        lengths: Lengths::Uniform { min: 1, max: 60 },
        outputs: None,
        patience_s: None,
        service: None,
    };
    let arlo = policy("arlo-paper", json!({"first_allocation_s": 2.0, "period_s": 5.0}));
    let r = run(arlo, 8, workload, 12.0, 500_000_000);
    assert_eq!(r.measured.dropped, 0);
    let state = &r.policy_state;
    let short = state["instances"]["fixed:64x1"].as_u64().unwrap();
    let longest = state["instances"]["fixed:512x1"].as_u64().unwrap();
    assert!(short >= 5 && longest >= 1, "{state}");
    assert!(state["counters"]["replacements"].as_u64().unwrap() >= 4, "{state}");
    assert_eq!(state["draining"], 0);
    // A replacement hands its slot over at once (the new instance loads in it): eight slots.
    assert!(r.instances_over_time.iter().all(|(_, n)| *n <= 8), "{:?}", r.instances_over_time);
    assert!((r.mean_instances - 8.0).abs() < 1e-9, "{}", r.mean_instances);
}

#[test]
fn target_tracking_scales_out_under_load_and_in_when_calm() {
    // 1 200 req/s of 512-token work (3.5 ms each) needs more than the 2 instances it starts
    // with; then the load stops and the extra instances are released.
    let workload = Workload {
        arrivals: Arrivals::Mmpp { rates: vec![1_200.0, 1.0], dwell_s: 20.0 },
        lengths: Lengths::Fixed { len: 500 },
        outputs: None,
        patience_s: None,
        service: None,
    };
    let params = json!({"runtime_set": "explicit", "max_lens": [512], "allocate": false,
        "scaling": {"rule": "target-tracking", "scale_in_period_s": 5.0, "window_s": 2.0}});
    let r = run(policy("arlo-paper", params), 2, workload, 60.0, 200_000_000);
    let most = r.instances_over_time.iter().map(|(_, n)| *n).max().unwrap();
    let last = r.instances_over_time.last().unwrap().1;
    assert!(most >= 5, "scaled out to {most}");
    assert!(last < most, "scaled back in: {:?}", r.instances_over_time);
    assert!(r.mean_instances > 2.0 && r.mean_instances < most as f64);
}

/// The Arlo authors' GPU table (DistilBERT, TensorRT), from `../shared/data`.
fn gpu_table() -> LatencyProfile {
    let path = morph_assets::shared_data().join("profiles/distilbert_trt_gpu_bs1-64_seq1-512.json");
    LatencyProfile::load(&path).expect("the shared GPU table")
}

#[test]
fn near_saturation_on_short_texts_the_robust_form_beats_dt_from_the_first_second() {
    // Sentence-length texts only (the failure of issue 19) on 10 GPU instances at 6 000 req/s,
    // ~80% of what 9 short instances and the one long one serve, measured from t = 0 (issue 50).
    // The paper's form starts from an even split over its staircase (64, 128, … 512 tokens),
    // binds each request to an instance on arrival, and the backlog it builds there does not
    // drain in time; the robust form starts as DT, binds late, replaces make-before-break at
    // its first allocation (1 s), and is faster than DT from then on, start-up included.
    let slo = Some(ms_to_nanos(50.0));
    let ctx = Context { profile: Some(Arc::new(gpu_table())), slo, ..Context::default() };
    let requests = Workload {
        arrivals: Arrivals::Poisson { rate: 6_000.0 },
        // Mostly under 64 tokens, a few just over (as SST-2's longest sentences are).
        lengths: Lengths::Empirical { values: (5..=60).chain(66..=70).collect() },
        outputs: None,
        patience_s: None,
        service: None,
    }
    .generate(20.0, 1)
    .expect("a workload");
    let cost = ProfileCost::new(gpu_table(), 1.22);
    // Replacing a runtime takes a second, as in the scenarios.
    let second = ms_to_nanos(1_000.0);
    let startup = Startup { cold: second, warm: second };
    let options = SimOptions { startup, slo, ..SimOptions::default() };
    let serve = |name: &str, params| {
        let policy = build(name, &params, &ctx).expect("a fleet policy");
        let layout = policy.layout(10).expect("a layout");
        let report = simulate(policy, &layout, &cost, requests.iter().copied(), &options);
        let r = &report.measured;
        assert_eq!((r.completed, r.dropped, r.requests), (requests.len(), 0, requests.len()), "{name}");
        report
    };
    let robust = serve("arlo", json!({}));
    let paper = serve("arlo-paper", json!({"first_allocation_s": 5.0}));
    let dt = serve("dt", json!({}));
    let (r, d) = (&robust.measured, &dt.measured);
    assert!(r.slo_attainment >= d.slo_attainment && r.late == 0, "robust {r:?}");
    assert!(paper.measured.slo_attainment < 0.9, "paper: {:.3}", paper.measured.slo_attainment);
    assert!(r.mean_latency_ms < d.mean_latency_ms, "{} vs DT {}", r.mean_latency_ms, d.mean_latency_ms);
    assert!(r.p99_latency_ms <= d.p99_latency_ms, "{} vs DT {}", r.p99_latency_ms, d.p99_latency_ms);
    // No second of the start-up is slower than DT's slowest.
    let worst = |t: &[morph_sim::Interval]| t.iter().map(|i| i.max_latency_ms).fold(0.0, f64::max);
    assert!(worst(&robust.timeline) <= worst(&dt.timeline), "a start-up transient: {:?}", robust.timeline);
    // It started as DT and became Arlo: short fixed runtimes hold most instances, the longest
    // (dynamic-shaped) keeps at least one (Eq. 7); each replacement's successor came up first.
    let instances = robust.policy_state["instances"].as_object().unwrap();
    let count = |fixed: bool| -> u64 {
        instances
            .iter()
            .filter(|(r, _)| r.starts_with("fixed") == fixed)
            .map(|(_, n)| n.as_u64().unwrap())
            .sum()
    };
    assert!(count(true) >= 7 && count(false) >= 1, "{instances:?}");
    let most = robust.instances_over_time.iter().map(|(_, n)| *n).max().unwrap();
    assert!(most > 10, "successors start beside the instances they replace: {most}");
}
