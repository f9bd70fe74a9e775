//! Property test of the ledger's promise: whatever a policy does, right or wrong, and whatever
//! happens to its instances (batches that finish or fail, clients that leave, workers that are
//! lost), every admitted request is answered exactly once, and until then it is unanswered.

use std::collections::HashMap;

use proptest::prelude::*;

use super::*;
use crate::fixtures::Puppet;
use crate::policy::{BatchPlan, DropReason};
use crate::runtime::RuntimeSpec;
use crate::unit::{ModelId, StageSpec};

/// What the policy may do: request and instance numbers are drawn from small ranges, so that
/// some name requests that are running, answered or unknown, and instances that are busy,
/// gone or never were.
#[derive(Debug, Clone)]
enum Act {
    Run { instance: u32, requests: Vec<u64>, next_stage: bool },
    Drop { request: u64 },
    Retire { instance: u32 },
}

/// What happens outside the policy, each answered with some acts.
#[derive(Debug, Clone)]
enum Step {
    Arrive { input_len: u32 },
    Tick,
    BatchDone { instance: u32, failed: bool },
    Cancel { request: u64 },
    Lost { instance: u32 },
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        4 => (0u32..5, proptest::collection::vec(0u64..12, 0..4), any::<bool>())
            .prop_map(|(instance, requests, next_stage)| Act::Run { instance, requests, next_stage }),
        1 => (0u64..12).prop_map(|request| Act::Drop { request }),
        1 => (0u32..5).prop_map(|instance| Act::Retire { instance }),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (1u32..80).prop_map(|input_len| Step::Arrive { input_len }),
        2 => Just(Step::Tick),
        3 => (0u32..5, proptest::bool::weighted(0.2))
            .prop_map(|(instance, failed)| Step::BatchDone { instance, failed }),
        1 => (0u64..12).prop_map(|request| Step::Cancel { request }),
        1 => (0u32..5).prop_map(|instance| Step::Lost { instance }),
    ]
}

fn action(act: &Act) -> Action {
    match act {
        Act::Run { instance, requests, next_stage } => Action::Run {
            instance: InstanceId(*instance),
            requests: requests.iter().map(|r| RequestId(*r)).collect(),
            plan: if *next_stage { BatchPlan::next_stage() } else { BatchPlan::FINISH },
        },
        Act::Drop { request } => {
            Action::Drop { request: RequestId(*request), reason: DropReason::QueueFull { capacity: 1 } }
        }
        Act::Retire { instance } => Action::Retire { instance: InstanceId(*instance) },
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_request_is_answered_exactly_once(
        script in proptest::collection::vec((step(), proptest::collection::vec(act(), 0..4)), 1..60)
    ) {
        let policy = Puppet::default();
        let mut ledger = Ledger::new(Box::new(policy.clone()), OnViolation::Refuse);
        let runtime = RuntimeSpec::dynamic(64, 2);
        let stage = |k| UnitSpec::batch(runtime).with_stage(StageSpec::even(ModelId(0), k, 2, 6));
        // Whole encoders and both stages of a two-stage cut.
        for unit in [UnitSpec::batch(runtime), stage(0), stage(1), stage(0), UnitSpec::batch(runtime)] {
            ledger.add_instance(Time::ZERO, unit, HostId(0), &mut Vec::new());
        }
        let mut arrived = Vec::new();
        let mut answers: HashMap<RequestId, usize> = HashMap::new();
        for (at, (step, acts)) in script.iter().enumerate() {
            *policy.next.lock().unwrap_or_else(|e| e.into_inner()) = acts.iter().map(action).collect();
            let now = Time(at as u64 + 1);
            let mut effects = Vec::new();
            match step {
                Step::Arrive { input_len } => {
                    let new = NewRequest { input_len: *input_len, generation: None, service: None };
                    arrived.push(ledger.arrive(now, new, &mut effects));
                }
                Step::Tick => ledger.tick(now, &mut effects),
                Step::BatchDone { instance, failed } => {
                    ledger.batch_done(now, InstanceId(*instance), *failed, None, &mut effects)
                }
                Step::Cancel { request } => ledger.cancel(now, RequestId(*request), &mut effects),
                Step::Lost { instance } => ledger.instance_lost(now, InstanceId(*instance), &mut effects),
            }
            for effect in &effects {
                if let Effect::Answer { request, .. } = effect {
                    *answers.entry(*request).or_default() += 1;
                }
            }
            prop_assert!(answers.values().all(|&n| n == 1), "answered twice: {answers:?} after {step:?}");
            let unanswered = ledger.unanswered();
            for request in &arrived {
                prop_assert!(
                    answers.contains_key(request) != unanswered.contains(request),
                    "{request:?} must be answered or unanswered, not both or neither, after {step:?}"
                );
            }
        }
        // The end: every batch finishes, and the policy drops whatever still waits.
        for round in 0..3u64 {
            let drops = ledger.unanswered().into_iter().map(|request| Action::Drop {
                request,
                reason: DropReason::QueueFull { capacity: 1 },
            });
            *policy.next.lock().unwrap_or_else(|e| e.into_inner()) = drops.collect();
            let mut effects = Vec::new();
            ledger.tick(Time(1000 + round), &mut effects);
            for instance in 0..5 {
                ledger.batch_done(Time(1000 + round), InstanceId(instance), false, None, &mut effects);
            }
            for effect in &effects {
                if let Effect::Answer { request, .. } = effect {
                    *answers.entry(*request).or_default() += 1;
                }
            }
        }
        prop_assert!(ledger.unanswered().is_empty(), "{:?}", ledger.unanswered());
        for request in &arrived {
            prop_assert_eq!(answers.get(request), Some(&1), "{:?}", request);
        }
    }
}
