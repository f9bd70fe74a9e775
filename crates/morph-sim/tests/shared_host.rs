//! Several models on one host's cores in the simulator: computations wait in one line for
//! their threads' cores, earliest deadline first by each model's slack; a static split gives
//! each model its own cores; the controller moves first place to the model whose backlog
//! needs it and lets go when it drains.

use morph_core::fixtures::flat_profile;
use morph_core::{Policy, RuntimeSpec, Time, UnitSpec};
use morph_policy::{DynamicBatching, DynamicBatchingConfig};
use morph_sim::{HostedModel, ProfileCost, SimOptions, SimRequest, Sharing, simulate_host};

const MS: u64 = 1_000_000;

fn fifo() -> Box<dyn Policy> {
    Box::new(DynamicBatching::new(DynamicBatchingConfig {
        max_batch_tokens: 1 << 30,
        max_queue: usize::MAX,
        ..Default::default()
    }))
}

/// One-row batches of `ms` whatever their length.
fn flat(ms: f64) -> ProfileCost {
    ProfileCost::new(flat_profile(ms, 1), 1.0)
}

fn at(ms: &[f64]) -> Vec<SimRequest> {
    ms.iter().map(|t| SimRequest::new(Time::from_millis_f64(*t), 10, 0)).collect()
}

fn model<'a>(name: &str, instances: usize, cost: &'a ProfileCost, arrivals: &[f64], slo_ms: u64) -> HostedModel<'a> {
    HostedModel {
        name: name.into(),
        policy: fifo(),
        cluster: vec![UnitSpec::encoder(RuntimeSpec::dynamic(512, 1)); instances],
        cost,
        requests: at(arrivals),
        options: SimOptions { per_request: true, ..SimOptions::default() },
        slo: slo_ms * MS,
    }
}

/// Each model's latencies in ms, in arrival order.
fn latencies(report: &morph_sim::HostReport) -> Vec<Vec<f64>> {
    report
        .models
        .iter()
        .map(|(_, r)| r.answers.iter().map(|a| a.as_ref().expect("answered").latency as f64 / 1e6).collect())
        .collect()
}

#[test]
fn on_one_core_the_model_with_less_slack_goes_first_and_nothing_computes_beside_it() {
    let cost = flat(10.0);
    // Model a (two instances, SLO 1 s: slack 250 ms) takes the core at 0 and asks again at 1 ms;
    // model b (SLO 8 ms: slack 2 ms) asks at 2 ms and goes ahead of a's second batch at 10 ms.
    let models = vec![model("a", 2, &cost, &[0.0, 1.0], 1000), model("b", 1, &cost, &[2.0], 8)];
    let r = simulate_host(models, 1, &Sharing::ByLoad);
    assert_eq!(latencies(&r), vec![vec![10.0, 29.0], vec![18.0]]);
    // The core held 30 ms of batches in all, its last period cut at the last event (30 ms).
    assert_eq!(r.core_seconds.len(), 2);
    assert!((r.core_seconds.iter().sum::<f64>() - 0.03).abs() < 1e-9, "{:?}", r.core_seconds);
    let last = r.periods.last().expect("a period");
    assert!((last.threads.iter().sum::<f64>() - 1.0).abs() < 1e-9, "{last:?}");
}

#[test]
fn a_split_gives_each_model_its_own_cores_and_none_of_the_others() {
    let cost = flat(10.0);
    let build = || vec![model("a", 2, &cost, &[0.0, 1.0], 1000), model("b", 1, &cost, &[2.0], 8)];
    // Split 1+1 of two cores: a's two batches share its one core, b runs at once on its own.
    let split = simulate_host(build(), 2, &Sharing::Split(vec![1, 1]));
    assert_eq!(latencies(&split), vec![vec![10.0, 19.0], vec![10.0]]);
    assert_eq!(split.sharing, "split 1+1");
    // Shared by load, a's two batches take both cores at once and b waits for the first to end.
    let shared = simulate_host(build(), 2, &Sharing::ByLoad);
    assert_eq!(latencies(&shared), vec![vec![10.0, 10.0], vec![18.0]]);
}

#[test]
fn the_splits_of_a_host_give_every_model_a_core() {
    let splits: Vec<String> = Sharing::splits(4, 3).iter().map(Sharing::label).collect();
    assert_eq!(splits, ["split 1+1+2", "split 1+2+1", "split 2+1+1"]);
    assert!(Sharing::splits(2, 3).is_empty());
}

#[test]
fn a_flooded_model_becomes_critical_its_cores_rise_and_it_lets_go_once_drained() {
    let cost = flat(10.0);
    // Model a is flooded for its first second (400 requests on two instances, SLO 200 ms);
    // model b gets one request every 50 ms throughout.
    let flood: Vec<f64> = (0..400).map(|i| f64::from(i) * 2.5).collect();
    let steady: Vec<f64> = (0..80).map(|i| f64::from(i) * 50.0).collect();
    let models = vec![model("a", 2, &cost, &flood, 200), model("b", 2, &cost, &steady, 200)];
    let r = simulate_host(models, 2, &Sharing::ByLoad);
    let first = r.moves.first().expect("a move");
    assert_eq!((first.critical.as_deref(), first.reason), (Some("a"), "backlog"));
    let last = r.moves.last().expect("a move");
    assert_eq!((last.critical.as_deref(), last.reason), (None, "drained"), "{:?}", r.moves);
    // While flooded, model a holds more cores than b; at the end, b holds what it needs.
    let early = &r.periods[1].threads;
    assert!(early[0] > early[1], "{early:?}");
    for p in &r.periods {
        assert!(p.threads.iter().sum::<f64>() <= 2.0 + 1e-9, "{p:?}");
    }
    assert!(r.models.iter().all(|(_, m)| m.measured.dropped == 0));
}
