//! QUART and its baselines on simulated pipelines: QNA's CV propagation against a simulated
//! two-stage tandem, scale-up from one replica per stage with every request answered once,
//! cold versus warm starts from the host cache (and a first scale-up warm from a spread layout),
//! bursts sized by the fallback or the burst forecast, launches bounded by servers' slots, and
//! replicas placed away from a server that left and on one that joined.

use std::sync::Arc;

use morph_core::fixtures::request;
use morph_core::{HostSlots, Outcome, Policy, RuntimeSpec, StageTime, StageTimes, time::ms_to_nanos};
use morph_policy::quart::qna::departure_cv2;
use morph_policy::registry::{Context, build};
use morph_sim::cost::Startup;
use morph_sim::workload::{Arrivals, Lengths};
use morph_sim::{PipelineCost, Report, SimOptions, Workload, simulate};
use serde_json::json;

fn pipeline(stage_ms: &[f64]) -> Arc<StageTimes> {
    Arc::new(StageTimes {
        runtime: RuntimeSpec::fixed(128, 1),
        layers: 8,
        stages: stage_ms.iter().map(|&ms| StageTime::amdahl(ms, 0.5)).collect(),
        hop_ms: 0.0,
    })
}

fn requests(arrivals: Arrivals, seconds: f64, seed: u64) -> Vec<morph_sim::SimRequest> {
    let workload = Workload {
        arrivals,
        lengths: Lengths::Fixed { len: 64 },
        outputs: None,
        patience_s: None,
        service: None,
    };
    workload.generate(seconds, seed).expect("arrivals")
}

fn run(
    name: &str,
    params: serde_json::Value,
    p: &Arc<StageTimes>,
    hosts: HostSlots,
    rate: f64,
    cv: f64,
) -> Report {
    run_on(name, params, p, hosts, Arrivals::Gamma { rate, cv })
}

fn run_on(
    name: &str,
    params: serde_json::Value,
    p: &Arc<StageTimes>,
    hosts: HostSlots,
    arrivals: Arrivals,
) -> Report {
    let slo = ms_to_nanos(500.0);
    let ctx = Context {
        slo: Some(slo),
        pipeline: Some(p.clone()),
        hosts: Some(hosts.clone()),
        ..Context::default()
    };
    let policy: Box<dyn Policy> = build(name, &params, &ctx).expect("a pipeline policy");
    let layout = policy.layout(hosts.total_slots()).expect("pipelines lay out their stages");
    let options = SimOptions {
        slo: Some(slo),
        startup: Startup { cold: ms_to_nanos(8000.0), warm: ms_to_nanos(800.0) },
        hosts,
        cache_bytes: 1 << 40,
        model_bytes: 1 << 30,
        pipeline: Some(p.clone()),
        per_request: true,
        ..SimOptions::default()
    };
    simulate(policy, &layout, &PipelineCost(p.clone()), requests(arrivals, 240.0, 7), &options)
}

/// Whitt's QNA says a busy deterministic stage smooths bursty arrivals,
/// c_d² = 1 + (1 − ρ²)(c_a² − 1) + ρ²(c_s² − 1). A fixed one-replica-per-stage tandem at ρ = 0.8 with arrival CV 2 measures
/// stage 1's arrival CV near that prediction, well below stage 0's.
#[test]
fn qna_predicts_the_cv_the_second_stage_of_a_tandem_sees() {
    let p = pipeline(&[8.0, 8.0]);
    // 1 thread: 8 ms per request; λ = 100/s gives ρ = 0.8.
    let fixed = json!({ "r_max": 1, "pool": { "history_s": 10.0, "cv_window": 5000 } });
    let report = run("uniform-pipeline", fixed, &p, HostSlots::new(1, 2), 100.0, 2.0);
    let cv = |stage: u32| report.gauge_means[&format!("stage_cv{{stage={stage}}}")];
    let predicted = departure_cv2(cv(0).powi(2), 0.0, 0.8, 1).sqrt();
    assert!((cv(0) - 2.0).abs() < 0.4, "ingress CV {}", cv(0));
    assert!(cv(1) < cv(0) * 0.8, "the stage smooths: {} vs {}", cv(1), cv(0));
    let error = (cv(1) - predicted).abs() / predicted;
    assert!(error < 0.3, "measured {} vs QNA {predicted}", cv(1));
}

/// From one replica per stage under a load three replicas per stage can carry, QUART scales
/// every stage up, answers every request exactly once, and never holds more slots than exist.
#[test]
fn quart_scales_a_pipeline_up_and_answers_every_request_once() {
    let p = pipeline(&[10.0, 20.0, 10.0]);
    let hosts = HostSlots::new(4, 4);
    let report = run("quart", json!({}), &p, hosts.clone(), 120.0, 1.0);
    assert_eq!(report.measured.completed, report.measured.requests);
    assert!(report.answers.iter().all(|a| a.as_ref().is_some_and(|a| a.outcome == Outcome::Done)));
    let peak = report.instances_over_time.iter().map(|p| p.1).max().unwrap();
    assert!(peak > 3 && peak <= hosts.total_slots(), "peak {peak}");
    // The slow middle stage (20 ms) needs the most replicas.
    let replicas = |s: u32| report.gauge_means[&format!("stage_replicas{{stage={s}}}")];
    assert!(replicas(1) > replicas(0) && replicas(1) > replicas(2), "{:?}", report.gauge_means);
    // The per-stage series over time: every stage's replicas, in time order, and once the
    // start-up's backlog is gone (the last sample) the slow stage holds the most.
    let series = |s: u32| -> Vec<(f64, f64)> {
        let key = format!("stage_replicas{{stage={s}}}");
        report.stage_series.iter().filter(|(_, k, _)| *k == key).map(|(t, _, v)| (*t, *v)).collect()
    };
    let middle = series(1);
    assert!(middle.len() > 10, "{} samples", middle.len());
    assert!(middle.windows(2).all(|w| w[0].0 < w[1].0), "time runs forward");
    let last = |s: u32| series(s).last().map_or(0.0, |p| p.1);
    assert!(last(1) >= last(0) && last(1) >= last(2), "at the end {} {} {}", last(0), last(1), last(2));
}

/// Launches from the host cache start warm; a policy without it (or QUART with it off) starts
/// every replica cold, and the cold fleet is slower to catch up with a burst.
#[test]
fn the_host_cache_makes_relaunches_warm() {
    let p = pipeline(&[10.0, 10.0]);
    let on =
        run("quart", json!({ "pool": { "scale_down_delay_s": 2.0 } }), &p, HostSlots::new(1, 16), 150.0, 4.0);
    let off = run(
        "quart",
        json!({ "pool": { "scale_down_delay_s": 2.0, "host_cache": false } }),
        &p,
        HostSlots::new(1, 16),
        150.0,
        4.0,
    );
    assert!(
        on.warm_starts > 0,
        "cached stages relaunch warm: {} cold, {} warm",
        on.cold_starts,
        on.warm_starts
    );
    assert_eq!(off.warm_starts, 0);
    assert!(off.cold_starts > 0);
    assert!(
        on.measured.mean_latency_ms < off.measured.mean_latency_ms,
        "{} vs {}",
        on.measured.mean_latency_ms,
        off.measured.mean_latency_ms
    );
}

/// QUART's cache-aware placement spreads the first replicas one stage per host (QUART §6.2), so
/// the first scale-up of every stage starts warm beside its cached parameters; packed first-fit
/// fills host 0 with all four stages, and their first new replicas start cold elsewhere.
#[test]
fn a_spread_layout_makes_the_first_scale_up_warm() {
    let p = pipeline(&[10.0; 4]);
    let at = |placement: &str| {
        let params = json!({ "pool": { "placement": placement, "host_cache": true } });
        run("quart", params, &p, HostSlots::new(4, 4), 200.0, 1.0)
    };
    let spread = at("cache-aware");
    // Each stage's first three new replicas go beside it, warm.
    assert!(spread.warm_starts >= 12, "{} warm, {} cold", spread.warm_starts, spread.cold_starts);
    let packed = at("first-fit");
    assert!(
        packed.cold_starts > spread.cold_starts,
        "host 0 is full: the first new replicas start cold ({} against {})",
        packed.cold_starts,
        spread.cold_starts
    );
    assert_eq!(packed.measured.completed, packed.measured.requests);
}

/// Where the arrivals are too bursty for QUART's mean-rate window, `bursts = "fallback"` sizes
/// by the envelope rule and `bursts = "forecast"` by QUART's burst forecast; the default gives
/// bursts that last (an MMPP's states) to the forecast and bursts that come and go within a
/// second (gamma gaps of CV 6) to the fallback; the counters say which decided.
#[test]
fn bursty_arrivals_are_sized_by_the_fallback_or_the_burst_forecast() {
    let p = pipeline(&[10.0, 10.0]);
    let gauge = |r: &Report, name: &str| r.gauge_means.get(name).copied().unwrap_or_default();
    let on_gamma = |params| run("quart", params, &p, HostSlots::new(4, 4), 150.0, 6.0);
    let fallback = on_gamma(json!({ "bursts": "fallback" }));
    assert!(gauge(&fallback, "quart_fallbacks_total") > 0.0, "{:?}", fallback.gauge_means);
    assert_eq!(gauge(&fallback, "quart_burst_periods_total"), 0.0);
    let forecast = on_gamma(json!({ "bursts": "forecast" }));
    assert!(gauge(&forecast, "quart_burst_periods_total") > 0.0, "{:?}", forecast.gauge_means);
    assert_eq!(gauge(&forecast, "quart_fallbacks_total"), 0.0);
    assert_eq!(forecast.measured.completed, forecast.measured.requests);
    // The shares of time each decided are gauges' means, between 0 and 1.
    let share = gauge(&fallback, "quart_fallback_active");
    assert!(share > 0.0 && share <= 1.0, "{share}");
    assert_eq!(gauge(&forecast, "quart_fallback_active"), 0.0);
    assert!(gauge(&forecast, "quart_burst_forecast_active") > 0.0);
    // The default: on the gamma gaps the fallback decides most periods, on an on/off MMPP of
    // the same mean the forecast.
    let by_default = on_gamma(json!({}));
    let mmpp = Arrivals::Mmpp { rates: vec![15.0, 285.0], dwell_s: 15.0 };
    let on_mmpp = run_on("quart", json!({}), &p, HostSlots::new(4, 4), mmpp);
    for (report, forecast_most) in [(&by_default, false), (&on_mmpp, true)] {
        let (forecast, fallback) =
            (gauge(report, "quart_burst_forecast_active"), gauge(report, "quart_fallback_active"));
        assert_eq!(forecast > fallback, forecast_most, "{:?}", report.gauge_means);
        assert_eq!(report.measured.completed, report.measured.requests);
    }
    assert!(gauge(&on_mmpp, "quart_burst_persistence") > gauge(&by_default, "quart_burst_persistence"));
}

/// Every baseline runs on the same seams: the whole-model INFless-like pool launches whole
/// models, the others stages, and each answers every request.
#[test]
fn baselines_run_on_the_same_pipeline() {
    let p = pipeline(&[10.0, 10.0]);
    for name in ["infless-like", "inferline-like", "cocktail-like", "uniform-pipeline"] {
        let report = run(name, json!({}), &p, HostSlots::new(2, 8), 80.0, 1.0);
        assert_eq!(report.measured.completed, report.measured.requests, "{name}");
        let whole = report.policy_state["pool"]["whole_model"].as_bool().unwrap();
        assert_eq!(whole, name == "infless-like", "{name}");
        assert_eq!(report.warm_starts, 0, "{name} has no host cache");
    }
}

/// The `Launch` actions' servers.
fn launched_on(actions: &[morph_core::Action]) -> Vec<Option<morph_core::HostId>> {
    actions
        .iter()
        .filter_map(|a| match a {
            morph_core::Action::Launch { host, .. } => Some(*host),
            _ => None,
        })
        .collect()
}

/// A pipeline policy places no replica on a host that left (`Event::SlotsChanged` to 0: its
/// host's lease ended), keeps within the slots of those left, and uses a host that joined.
#[test]
fn replicas_avoid_a_server_that_left_and_go_to_one_that_joined() {
    use morph_core::{Event, HostId, InstanceId, InstanceInfo, Time};
    let p = pipeline(&[100.0, 100.0]);
    let ctx = Context {
        slo: Some(ms_to_nanos(500.0)),
        pipeline: Some(p.clone()),
        hosts: Some(HostSlots::new(2, 4)),
        ..Context::default()
    };
    let mut policy = build("uniform-pipeline", &json!({}), &ctx).expect("a pipeline policy");
    let layout = policy.layout(8).expect("its stages");
    let mut actions = Vec::new();
    for (i, unit) in layout.iter().enumerate() {
        let instance = InstanceInfo { id: InstanceId(i as u32), unit: *unit, host: HostId(1) };
        policy.on_event(Time::ZERO, Event::InstanceUp { instance, launch: None }, &mut actions);
    }
    policy.on_event(Time::ZERO, Event::SlotsChanged { host: HostId(0), slots: 0 }, &mut actions);
    // 400 arrivals in a second: the uniform rule wants more replicas of every stage than fit.
    for k in 0..400u64 {
        let at = Time(k * 2_500_000);
        policy.on_event(at, Event::Arrival(request(k, 64, at)), &mut actions);
    }
    actions.clear();
    policy.on_event(Time(1_500_000_000), Event::Tick, &mut actions);
    let placed = launched_on(&actions);
    assert_eq!(placed, vec![Some(HostId(1)); 2], "server 0 left: only server 1's 2 free slots");

    policy.on_event(Time(1_600_000_000), Event::SlotsChanged { host: HostId(2), slots: 4 }, &mut actions);
    actions.clear();
    policy.on_event(Time(2_600_000_000), Event::Tick, &mut actions);
    let placed = launched_on(&actions);
    assert!(!placed.is_empty() && placed.len() <= 4, "{placed:?}");
    assert!(placed.iter().all(|s| *s == Some(HostId(2))), "the server that joined: {placed:?}");
}

/// Eight stages asking for 3 replicas each on 16 slots: every stage gets its share of 2 (none
/// sits at 1 behind the stages of lower index), the shortfall is reported, and every request
/// is answered.
#[test]
fn scarce_slots_are_shared_by_need_without_starving_a_stage() {
    let p = pipeline(&[10.0; 8]);
    let report = run("uniform-pipeline", json!({}), &p, HostSlots::new(2, 8), 170.0, 1.0);
    assert_eq!(report.measured.completed, report.measured.requests);
    for stage in 0..8 {
        let replicas = report.gauge_means[&format!("stage_replicas{{stage={stage}}}")];
        assert!(replicas > 1.8, "stage {stage} holds {replicas} replicas: {:?}", report.gauge_means);
    }
    assert!(report.gauge_means["pipeline_slots_short"] > 0.0, "the shortfall is a gauge");
}
