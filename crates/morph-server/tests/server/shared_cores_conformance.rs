//! The several-model seam's contract: one script of two models on one shared core, run through
//! the live drivers (emulated engines computing through one `CoreBudget`, no HTTP) and through
//! the simulator's shared host, grants the core in the same order, so each model's requests
//! finish in the same order with the same outcome. Model a has two instances and a relaxed SLO,
//! model b one instance and a tight one: b's batch, asked for after a's second, goes first.
//! With a deadline, both give up on the same requests.

use std::sync::Arc;
use std::time::Duration;

use morph_backend::Backend;
use morph_core::fixtures::flat_profile;
use morph_core::{DropReason, LatencyProfile, Policy, RuntimeSpec, Time, UnitSpec};
use morph_engine::CoreBudget;
use morph_policy::cores::CoreController;
use morph_policy::give_up::GiveUpLate;
use morph_policy::{DynamicBatching, DynamicBatchingConfig};
use morph_server::Launcher;
use morph_server::driver::{Driver, SeqError};
use morph_server::metrics::Metrics;
use morph_sim::{HostedModel, ProfileCost, Sharing, SimOptions, SimRequest, simulate_host};

/// Every batch's time: long beside the spacing of the arrivals, so a busy machine's jitter
/// cannot change who waits when the core comes back.
const BATCH_MS: f64 = 150.0;
/// (model, arrival in ms) of each request; model 0 is a, 1 is b.
const SCRIPT: [(usize, u64); 3] = [(0, 0), (0, 30), (1, 60)];
/// Each model's SLO in ms and instances.
const MODELS: [(u64, usize); 2] = [(1000, 2), (8, 1)];

fn profile() -> LatencyProfile {
    flat_profile(BATCH_MS, 1)
}

fn fifo() -> Box<dyn Policy> {
    Box::new(DynamicBatching::new(DynamicBatchingConfig {
        max_batch_tokens: 1 << 30,
        max_queue: usize::MAX,
        ..Default::default()
    }))
}

fn unit() -> UnitSpec {
    UnitSpec::batch(RuntimeSpec::dynamic(64, 1))
}

/// What a script runs: (model, arrival in ms) of each request, each model's SLO in ms and
/// instances, and each model's policy.
struct Script {
    requests: &'static [(usize, u64)],
    models: &'static [(u64, usize)],
    policy: fn() -> Box<dyn Policy>,
}

const TWO_MODELS: Script = Script { requests: &SCRIPT, models: &MODELS, policy: fifo };

/// The order the script's requests end in, by their index in the script, each with whether
/// it was served (else given up).
fn simulated(script: &Script) -> Vec<(usize, bool)> {
    let cost = ProfileCost::new(profile(), 1.0);
    let models: Vec<HostedModel<'_>> = script
        .models
        .iter()
        .enumerate()
        .map(|(m, &(slo_ms, instances))| HostedModel {
            name: format!("model {m}"),
            policy: (script.policy)(),
            cluster: vec![unit(); instances],
            cost: &cost,
            requests: script
                .requests
                .iter()
                .filter(|(of, _)| *of == m)
                .map(|(_, ms)| SimRequest::new(Time(ms * 1_000_000), 10, 0))
                .collect(),
            options: SimOptions { per_request: true, ..SimOptions::default() },
            slo: slo_ms * 1_000_000,
            core_slo: slo_ms * 1_000_000,
        })
        .collect();
    let report = simulate_host(models, 1, &Sharing::ByLoad);
    assert!(report.moves.is_empty(), "the controller moves nothing in this script: {:?}", report.moves);
    // Each request's end: its arrival plus its latency.
    let mut ends: Vec<(u64, usize, bool)> = Vec::new();
    for (m, (_, r)) in report.models.iter().enumerate() {
        let mine = script.requests.iter().enumerate().filter(|(_, (of, _))| *of == m);
        for ((i, (_, ms)), answer) in mine.zip(&r.answers) {
            let answer = answer.as_ref().expect("answered");
            let served = match &answer.outcome {
                morph_core::Outcome::Done => true,
                morph_core::Outcome::Dropped(DropReason::DeadlineUnreachable { .. }) => false,
                other => panic!("request {i}: {other:?}"),
            };
            ends.push((ms * 1_000_000 + answer.latency, i, served));
        }
    }
    ends.sort();
    ends.into_iter().map(|(_, i, served)| (i, served)).collect()
}

async fn live(script: &Script) -> Vec<(usize, bool)> {
    let budget = CoreBudget::new(1);
    let drivers: Vec<Arc<Driver>> = script
        .models
        .iter()
        .map(|&(slo_ms, instances)| {
            let slack = CoreController::relaxed_slack(Duration::from_millis(slo_ms));
            let launcher =
                Launcher::new(Backend::emulated(Arc::new(profile()), 4)).with_cores(budget.share(slack));
            let launcher = Arc::new(launcher);
            let workers = (0..instances).map(|_| launcher.start(unit(), None).expect("worker")).collect();
            let driver = Driver::new((script.policy)(), workers, launcher, Arc::new(Metrics::default()));
            driver.begin();
            driver
        })
        .collect();
    let start = tokio::time::Instant::now();
    let (done, mut finished) = tokio::sync::mpsc::unbounded_channel();
    for (i, &(m, ms)) in script.requests.iter().enumerate() {
        tokio::time::sleep_until(start + Duration::from_millis(ms)).await;
        let (claim, rx) = drivers[m].submit(vec![1; 10]);
        let done = done.clone();
        tokio::spawn(async move {
            let answer = tokio::time::timeout(Duration::from_secs(30), rx).await.expect("answered in time");
            claim.answered();
            let served = match answer.expect("answered") {
                Ok(_) => true,
                Err(SeqError::Dropped(DropReason::DeadlineUnreachable { .. })) => false,
                Err(other) => panic!("request {i}: {other:?}"),
            };
            done.send((i, served)).expect("the test waits");
        });
    }
    let mut order = Vec::new();
    for _ in script.requests {
        order.push(finished.recv().await.expect("every request finishes"));
    }
    for driver in drivers {
        let workers = driver.take_instances();
        tokio::task::spawn_blocking(move || drop(workers)).await.expect("stopping workers");
    }
    order
}

#[tokio::test]
async fn two_models_on_one_core_finish_in_the_same_order_live_and_simulated() {
    let simulated = simulated(&TWO_MODELS);
    // a's first batch, then b's (asked for after a's second, with less slack), then a's second.
    assert_eq!(simulated, vec![(0, true), (2, true), (1, true)], "the simulator's order");
    assert_eq!(live(&TWO_MODELS).await, simulated, "the live drivers' order");
}

/// One model, one instance, a 200 ms deadline: request 0 runs at once; when its batch ends at
/// 150 ms, requests 1 and 2 (due at 230 and 260 ms) are given up, since a batch starting then
/// would end at 300 ms; request 3, coming at 400 ms to an idle instance, is served.
fn fifo_with_deadline() -> Box<dyn Policy> {
    Box::new(GiveUpLate::new(fifo(), 200_000_000))
}

const DEADLINE: Script = Script {
    requests: &[(0, 0), (0, 30), (0, 60), (0, 400)],
    models: &[(1000, 1)],
    policy: fifo_with_deadline,
};

#[tokio::test]
async fn with_a_deadline_both_drivers_give_up_on_the_same_requests() {
    let by_request = |mut ends: Vec<(usize, bool)>| {
        ends.sort();
        ends
    };
    let simulated = by_request(simulated(&DEADLINE));
    assert_eq!(simulated, vec![(0, true), (1, false), (2, false), (3, true)], "the simulator's outcomes");
    assert_eq!(by_request(live(&DEADLINE).await), simulated, "the live drivers' outcomes");
}
