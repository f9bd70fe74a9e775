//! The seam's contract: one scripted scenario — arrivals, completions, a two-stage hand-off
//! with a non-zero token plan, a launch and a retire, a cancellation, a drop — run through the
//! live driver (emulated engines, no HTTP) and through the simulator gives the same sequence
//! of policy events and actions, and the same outcome for every request.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use morph_backend::Backend;
use morph_core::fixtures::flat_profile;
use morph_core::{
    Action, BatchPlan, DropReason, Event, InstanceId, LatencyProfile, ModelId, Outcome, Policy, RequestId,
    RequestInfo, RuntimeSpec, StageSpec, Then, Tickets, Time, TokenPlan, UnitSpec,
};
use morph_server::Launcher;
use morph_server::driver::{Driver, SeqError};
use morph_server::metrics::Metrics;
use morph_sim::cost::Startup;
use morph_sim::{ProfileCost, SimOptions, SimRequest, simulate};

/// Input lengths that tell the script what to do with a request.
const PIPELINE: u32 = 10; // stage 0, then stage 1 under plan -1
const HOLD: u32 = 13; // kept queued (until its client leaves)
const HOPELESS: u32 = 20; // dropped: its deadline cannot be met
const SCALE: u32 = 30; // launches a whole-model instance, runs there, retires the initial one

fn runtime() -> RuntimeSpec {
    RuntimeSpec::dynamic(64, 4)
}

fn stage(index: u16) -> UnitSpec {
    UnitSpec::batch(runtime()).with_stage(StageSpec::even(ModelId(0), index, 2, 6))
}

fn whole() -> UnitSpec {
    UnitSpec::batch(runtime())
}

/// The initial layout: the two stages of a pipeline and one whole model.
fn layout() -> Vec<UnitSpec> {
    vec![stage(0), stage(1), whole()]
}

/// A policy whose every decision follows from what it was told, so that both drivers must
/// make it decide the same.
#[derive(Default)]
struct Script {
    stages: [Option<InstanceId>; 2],
    wholes: Vec<InstanceId>,
    held: Vec<RequestInfo>,
    tickets: Tickets,
    scaled: Option<InstanceId>,
}

impl Script {
    fn run(instance: InstanceId, request: RequestId, plan: BatchPlan) -> Action {
        Action::Run { instance, requests: vec![request], plan }
    }
}

impl Policy for Script {
    fn name(&self) -> &str {
        "script"
    }

    fn on_event(&mut self, _now: Time, event: Event, actions: &mut Vec<Action>) {
        match event {
            Event::InstanceUp { instance, launch } => match instance.unit.stage {
                Some(s) => self.stages[s.index as usize] = Some(instance.id),
                None if launch.is_some() => {
                    // The launched instance takes the held scale request; the initial one goes.
                    self.scaled = Some(instance.id);
                    actions.extend(self.wholes.drain(..).map(|instance| Action::Retire { instance }));
                    let scale = self.held.iter().position(|r| r.input_len == SCALE);
                    if let Some(r) = scale.map(|at| self.held.remove(at)) {
                        actions.push(Script::run(instance.id, r.id, BatchPlan::FINISH));
                    }
                }
                None => self.wholes.push(instance.id),
            },
            Event::Arrival(r) => match r.input_len {
                PIPELINE => {
                    actions.push(Script::run(self.stages[0].expect("stage 0"), r.id, BatchPlan::next_stage()))
                }
                HOPELESS => actions.push(Action::Drop {
                    request: r.id,
                    reason: DropReason::DeadlineUnreachable { within: 1_000_000 },
                }),
                SCALE => {
                    self.held.push(r);
                    actions.push(Action::Launch { ticket: self.tickets.issue(), unit: whole(), host: None });
                }
                _ => self.held.push(r),
            },
            Event::BatchDone { instance, requests, failed: false, .. }
                if Some(instance) == self.stages[0] =>
            {
                let plan = BatchPlan { tokens: TokenPlan::Merge(1), then: Then::Finish };
                let next = self.stages[1].expect("stage 1");
                actions.push(Action::Run { instance: next, requests, plan });
            }
            Event::Cancelled { request } => self.held.retain(|r| r.id != request),
            _ => {}
        }
    }

    fn queue_len(&self) -> usize {
        self.held.len()
    }

    fn describe(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}

/// What a policy was told and what it answered, without the times (which differ).
type Log = Arc<Mutex<Vec<(Event, Vec<Action>)>>>;

struct Recorded {
    inner: Script,
    log: Log,
}

impl Policy for Recorded {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn on_event(&mut self, now: Time, event: Event, actions: &mut Vec<Action>) {
        let start = actions.len();
        self.inner.on_event(now, event.clone(), actions);
        let event = match event {
            Event::InstanceUp { instance, launch } => {
                Event::InstanceUp { instance, launch: launch.map(|l| morph_core::Launched { took: 0, ..l }) }
            }
            Event::Arrival(r) => Event::Arrival(RequestInfo { arrival: Time::ZERO, ..r }),
            // The live engine measures each batch; the simulator's clock is its time.
            Event::BatchDone { instance, requests, failed, .. } => {
                Event::BatchDone { instance, requests, failed, computed: None }
            }
            other => other,
        };
        self.log.lock().expect("log").push((event, actions[start..].to_vec()));
    }

    fn queue_len(&self) -> usize {
        self.inner.queue_len()
    }

    fn describe(&self) -> serde_json::Value {
        self.inner.describe()
    }
}

fn recorded() -> (Box<dyn Policy>, Log) {
    let log = Log::default();
    (Box::new(Recorded { inner: Script::default(), log: log.clone() }), log)
}

fn profile() -> LatencyProfile {
    flat_profile(5.0, 4)
}

/// The scenario's requests, one per second (each step settles before the next).
const STREAM: [u32; 5] = [PIPELINE, HOLD, HOPELESS, SCALE, PIPELINE];

fn simulated() -> (Vec<(Event, Vec<Action>)>, Vec<Outcome>) {
    let (policy, log) = recorded();
    let requests: Vec<SimRequest> = STREAM
        .iter()
        .enumerate()
        .map(|(i, &len)| {
            let r = SimRequest::new(Time(i as u64 * 1_000_000_000), len, 0);
            // The held request's client leaves after 100 ms.
            SimRequest { cancel_after: (len == HOLD).then_some(100_000_000), ..r }
        })
        .collect();
    let startup = Startup { cold: 50_000_000, warm: 50_000_000 };
    let options = SimOptions { startup, per_request: true, ..SimOptions::default() };
    let report = simulate(policy, &layout(), &ProfileCost::new(profile(), 1.0), requests, &options);
    let outcomes = report.answers.into_iter().map(|a| a.expect("every request answered").outcome).collect();
    let log = log.lock().expect("log").clone();
    (log, outcomes)
}

async fn live() -> (Vec<(Event, Vec<Action>)>, Vec<Outcome>) {
    let (policy, log) = recorded();
    let launcher = Arc::new(Launcher::new(Backend::emulated(Arc::new(profile()), 4)));
    let workers = layout().into_iter().map(|u| launcher.start(u, None).expect("worker")).collect();
    let driver = Driver::new(policy, workers, launcher, Arc::new(Metrics::default()));
    driver.begin();
    let mut outcomes = Vec::new();
    for len in STREAM {
        let (claim, rx) = driver.submit(vec![1; len as usize]);
        if len == HOLD {
            drop(claim); // the client leaves while its request is queued
            assert!(rx.await.is_err(), "a cancelled request gets no answer");
            outcomes.push(Outcome::Cancelled);
            continue;
        }
        let answer = tokio::time::timeout(Duration::from_secs(30), rx).await.expect("answered in time");
        claim.answered();
        outcomes.push(match answer.expect("answered") {
            Ok(_) => Outcome::Done,
            Err(SeqError::Dropped(reason)) => Outcome::Dropped(reason),
            Err(SeqError::Engine(e)) => panic!("engine error {e}"),
        });
    }
    let workers = driver.take_instances();
    tokio::task::spawn_blocking(move || drop(workers)).await.expect("stopping workers");
    let log = log.lock().expect("log").clone();
    (log, outcomes)
}

#[tokio::test]
async fn one_script_through_both_drivers_gives_the_same_decisions_and_outcomes() {
    let (sim_log, sim_outcomes) = simulated();
    let (live_log, live_outcomes) = live().await;
    let dropped = Outcome::Dropped(DropReason::DeadlineUnreachable { within: 1_000_000 });
    let expected = vec![Outcome::Done, Outcome::Cancelled, dropped, Outcome::Done, Outcome::Done];
    assert_eq!(sim_outcomes, expected, "the simulator's outcomes");
    assert_eq!(live_outcomes, expected, "the live driver's outcomes");
    for (i, (sim, live)) in sim_log.iter().zip(&live_log).enumerate() {
        assert_eq!(sim, live, "step {i} differs (simulated, live)");
    }
    assert_eq!(sim_log.len(), live_log.len());
    // The script exercised what it is for.
    let actions: Vec<&Action> = sim_log.iter().flat_map(|(_, a)| a).collect();
    let has = |f: &dyn Fn(&Action) -> bool| actions.iter().any(|a| f(a));
    assert!(has(&|a| matches!(a, Action::Run { plan, .. } if plan.then == Then::NextStage)));
    assert!(has(&|a| matches!(a, Action::Run { plan, .. } if plan.tokens == TokenPlan::Merge(1))));
    assert!(has(&|a| matches!(a, Action::Launch { .. })) && has(&|a| matches!(a, Action::Retire { .. })));
    assert!(has(&|a| matches!(a, Action::Drop { .. })));
    assert!(sim_log.iter().any(|(e, _)| matches!(e, Event::Cancelled { .. })));
}
