//! The live driver's state as a plain struct: what each report does to the callers, the
//! metrics and the work left outside the lock.

use std::sync::Arc;

use morph_core::fixtures::flat_profile;
use morph_core::{
    Action, BatchPlan, Event, InstanceId, Policy, RuntimeSpec, ServiceClass, TaskId, Time, TokenPlan,
    UnitSpec,
};
use morph_engine::{EngineError, Ran, Rows};
use morph_policy::{DynamicBatching, DynamicBatchingConfig};

use super::job::{Pooled, SeqError};
use super::state::{Outside, State};
use crate::launcher::Launcher;
use crate::metrics::Metrics;
use morph_backend::Backend;

/// A batch's outputs, as if computed in 1 ms.
fn outputs(vectors: Vec<Vec<f32>>) -> Result<Ran, EngineError> {
    let shape = morph_core::PaddedShape { len: 1, batch: vectors.len() as u32 };
    Ok(Ran { vectors, computed: morph_core::Computed { took: 1_000_000, shape } })
}

fn state_with(policy: Box<dyn Policy>) -> (State, Arc<Metrics>) {
    let metrics = Arc::new(Metrics::default());
    let mut state = State::new(policy, metrics.clone());
    let profile = flat_profile(1.0, 8);
    let launcher = Launcher::new(Backend::emulated(Arc::new(profile), 2));
    let instance = launcher.start(UnitSpec::batch(RuntimeSpec::dynamic(64, 8)), None).expect("an instance");
    let (id, outside) = state.add_instance(Time::ZERO, instance);
    assert_eq!((id, outside.len()), (InstanceId(0), 0));
    (state, metrics)
}

fn fifo() -> Box<dyn Policy> {
    Box::new(DynamicBatching::new(DynamicBatchingConfig {
        max_batch_tokens: 1 << 20,
        max_queue: 8,
        ..Default::default()
    }))
}

/// The batch the state left to run, with its requests and rows.
fn run_of(outside: Vec<Outside>) -> (Vec<morph_core::RequestId>, Rows) {
    match outside.into_iter().next() {
        Some(Outside::Run { requests, rows, .. }) => (requests, rows),
        other => panic!("expected a batch to run, got {other:?}"),
    }
}

/// A batch whose requests all name a task goes out tagged with each row's task (a prompt plan
/// takes each row's prompts by it); one without tasks goes out as plain token rows.
#[tokio::test]
async fn rows_carry_their_tasks_when_every_request_names_one() {
    let (mut state, _) = state_with(fifo());
    let service = ServiceClass { task: TaskId(2), deadline: None, utility_micros: 1_000_000 };
    let (id, _rx, outside) = state.submit(Time(1), vec![1, 2, 3], Some(service));
    assert_eq!(run_of(outside), (vec![id], Rows::Tasked(vec![vec![1, 2, 3]], vec![TaskId(2)])));
}

#[tokio::test]
async fn a_finished_batch_answers_each_caller_with_its_vector() {
    let (mut state, _) = state_with(fifo());
    let (id, mut rx, outside) = state.submit(Time(1), vec![1, 2, 3], None);
    let (requests, rows) = run_of(outside);
    assert_eq!((requests, rows), (vec![id], Rows::Tokens(vec![vec![1, 2, 3]])));
    assert!(rx.try_recv().is_err(), "not answered before the batch ends");
    let outside = state.batch_done(Time(2), InstanceId(0), &[id], outputs(vec![vec![0.5, 0.5]]));
    assert!(outside.is_empty());
    assert_eq!(
        rx.try_recv().expect("answered"),
        Ok(Pooled { vector: vec![0.5, 0.5], plan: TokenPlan::Plain })
    );
    assert!(state.ledger().unanswered().is_empty());
}

#[tokio::test]
async fn a_failed_batch_answers_each_caller_with_the_engine_error() {
    let (mut state, _) = state_with(fifo());
    let (a, mut rx_a, _) = state.submit(Time(1), vec![1], None);
    let (b, mut rx_b, _) = state.submit(Time(1), vec![2], None);
    state.batch_done(Time(2), InstanceId(0), &[a], Err(EngineError::Inference("boom".into())));
    let error = Err(SeqError::Engine(EngineError::Inference("boom".into())));
    assert_eq!(rx_a.try_recv().expect("a answered"), error);
    assert!(rx_b.try_recv().is_err(), "b runs next, after a's batch");
    assert!(state.ledger().place(b).is_some());
}

#[tokio::test]
async fn a_queued_request_whose_caller_left_leaves_the_queue_and_is_counted() {
    let (mut state, metrics) = state_with(fifo());
    let (a, _rx_a, _) = state.submit(Time(1), vec![1], None);
    let (b, mut rx_b, outside) = state.submit(Time(1), vec![2], None);
    assert!(outside.is_empty(), "b waits behind a");
    assert_eq!(state.policy().queue_len(), 1);
    assert!(state.cancel(Time(2), b).is_empty());
    assert_eq!(state.policy().queue_len(), 0);
    assert!(rx_b.try_recv().is_err(), "no answer: the caller is gone");
    assert!(metrics.render(&[], &[], &[]).contains("morph_cancellations_total{kind=\"queued\"} 1\n"));
    // a's batch ends and nothing else runs: b is gone for good.
    let outside = state.batch_done(Time(3), InstanceId(0), &[a], outputs(vec![vec![1.0]]));
    assert!(outside.is_empty());
    assert!(state.ledger().unanswered().is_empty());
    // A running embedding whose caller leaves is computed and discarded.
    let (c, mut rx_c, outside) = state.submit(Time(4), vec![3], None);
    run_of(outside);
    state.cancel(Time(5), c);
    assert!(metrics.render(&[], &[], &[]).contains("morph_cancellations_total{kind=\"discarded\"} 1\n"));
    state.batch_done(Time(6), InstanceId(0), &[c], outputs(vec![vec![1.0]]));
    assert!(rx_c.try_recv().is_err());
    assert!(state.ledger().unanswered().is_empty());
}

/// Runs every arrival on an instance that does not exist: a policy bug.
struct Broken;

impl Policy for Broken {
    fn name(&self) -> &str {
        "broken"
    }
    fn on_event(&mut self, _now: Time, event: Event, actions: &mut Vec<Action>) {
        if let Event::Arrival(r) = event {
            actions.push(Action::Run {
                instance: InstanceId(9),
                requests: vec![r.id],
                plan: BatchPlan::FINISH,
            });
        }
    }
    fn queue_len(&self) -> usize {
        0
    }
    fn describe(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}

#[tokio::test]
async fn a_refused_action_answers_its_request_with_an_error_and_is_counted() {
    let (mut state, metrics) = state_with(Box::new(Broken));
    let (_, mut rx, outside) = state.submit(Time(1), vec![1], None);
    assert!(outside.is_empty());
    assert!(matches!(rx.try_recv(), Ok(Err(SeqError::Engine(EngineError::Inference(_))))));
    assert!(metrics.render(&[], &[], &[]).contains("morph_policy_refusals_total 1"));
}

#[tokio::test]
async fn a_call_is_admitted_whole_or_refused_whole_before_any_of_it_runs() {
    let small_queue = DynamicBatchingConfig { max_batch_tokens: 1 << 20, max_queue: 2, ..Default::default() };
    let (mut state, metrics) = state_with(Box::new(DynamicBatching::new(small_queue)));
    assert_eq!(state.policy().refuses_any(), None, "an empty queue refuses nothing");
    // An idle server takes a call of three: one runs at once, two wait.
    let (admitted, outside) = state.submit_call(Time(1), vec![vec![1], vec![2], vec![3]], None);
    let admitted = admitted.expect("admitted whole");
    let (first, _) = run_of(outside);
    assert_eq!((admitted.len(), state.policy().queue_len()), (3, 2));
    // A second call while the queue is full: refused whole, nothing of it left behind, for the
    // reason the policy gives before any tokens are known (the server's refusal before tokenizing).
    let full = Some(morph_core::DropReason::QueueFull { capacity: 2 });
    assert_eq!(state.policy().refuses_any(), full);
    let (refused, outside) = state.submit_call(Time(2), vec![vec![4], vec![5]], None);
    assert_eq!(refused.err(), full);
    assert!(outside.is_empty());
    assert_eq!(state.policy().queue_len(), 2);
    assert!(
        !metrics.render(&[], &[], &[]).contains("morph_cancellations_total{kind=\"queued\"}"),
        "a refused call is not a cancellation"
    );
    // The first call's batches run to the end; no sequence of the refused call ever runs.
    let mut ran = first.clone();
    let mut outside = state.batch_done(Time(3), InstanceId(0), &first, outputs(vec![vec![1.0]]));
    while let Some(Outside::Run { instance, requests, .. }) = outside.pop() {
        ran.extend(requests.iter().copied());
        outside.extend(state.batch_done(
            Time(4),
            instance,
            &requests,
            outputs(vec![vec![1.0]; requests.len()]),
        ));
    }
    assert_eq!(ran, admitted.iter().map(|(id, _)| *id).collect::<Vec<_>>());
    assert!(state.ledger().unanswered().is_empty());
}

#[tokio::test]
async fn a_refused_call_withdraws_a_batch_that_had_not_started() {
    let small_queue = DynamicBatchingConfig { max_batch_tokens: 1 << 20, max_queue: 1, ..Default::default() };
    let (mut state, _) = state_with(Box::new(DynamicBatching::new(small_queue)));
    // The first input starts a batch on the idle instance, the second waits, the third finds
    // the queue full: the started batch is withdrawn before it runs and the instance is idle.
    let (refused, outside) = state.submit_call(Time(1), vec![vec![1], vec![2], vec![3]], None);
    assert_eq!(refused.err(), Some(morph_core::DropReason::QueueFull { capacity: 1 }));
    assert!(outside.is_empty(), "nothing left to run: {outside:?}");
    assert!(state.ledger().unanswered().is_empty());
    let (_, _, outside) = state.submit(Time(2), vec![4], None);
    run_of(outside);
}

#[tokio::test]
async fn a_lost_worker_leaves_and_is_replaced_and_its_batch_runs_once_more_then_fails() {
    let (mut state, _) = state_with(fifo());
    let (id, mut rx, outside) = state.submit(Time(1), vec![1, 2, 3], None);
    let (requests, _) = run_of(outside);
    let lost = EngineError::Lost("worker process 7 connection lost mid-batch".into());
    let outside = state.lost(Time(2), InstanceId(0), &requests, lost.clone());
    assert!(rx.try_recv().is_err(), "not answered: it waits to run again");
    assert!(matches!(outside[0], Outside::Retire { park: false, .. }), "never parked: {outside:?}");
    let unit = UnitSpec::batch(RuntimeSpec::dynamic(64, 8));
    let tickets: Vec<_> = outside
        .iter()
        .filter_map(|o| match o {
            Outside::Launch { ticket, unit: u, .. } if *u == unit => Some(*ticket),
            _ => None,
        })
        .collect();
    assert_eq!(tickets.len(), 1, "the layout is restored: {outside:?}");
    assert_eq!(state.ledger().instances().count(), 0);

    let profile = flat_profile(1.0, 1);
    let instance =
        Launcher::new(Backend::emulated(Arc::new(profile), 2)).start(unit, None).expect("an instance");
    let (replacement, outside) =
        state.launched(Time(3), tickets[0], Ok((instance, morph_core::StartKind::Warm)));
    let replacement = replacement.expect("up");
    let (again, rows) = run_of(outside);
    assert_eq!((again.clone(), rows), (vec![id], Rows::Tokens(vec![vec![1, 2, 3]])), "the same input again");
    state.lost(Time(4), replacement, &again, lost.clone());
    assert_eq!(rx.try_recv().expect("answered"), Err(SeqError::Engine(lost)), "lost twice: the error");
    assert!(state.ledger().unanswered().is_empty());
    let late = state.batch_done(Time(5), InstanceId(0), &[id], outputs(vec![vec![1.0, 1.0]]));
    assert!(late.is_empty(), "a late report of a lost instance changes nothing");
}

/// A batch is started from inside the task of the batch before it; its span must still be a root
/// of its own (linked to its calls), or the subscriber keeps every earlier batch alive as an
/// ancestor and each log line inside a batch names them all.
#[test]
fn a_batch_started_inside_another_batch_gets_a_root_span() {
    use tracing_subscriber::registry::{LookupSpan, Registry};
    tracing::subscriber::with_default(tracing_subscriber::registry(), || {
        let call = tracing::info_span!("call");
        let earlier = super::batch_span(InstanceId(0), 1, TokenPlan::Plain, std::slice::from_ref(&call));
        let _inside = earlier.enter();
        let next = super::batch_span(InstanceId(0), 1, TokenPlan::Plain, &[call]);
        tracing::dispatcher::get_default(|dispatch| {
            let registry = dispatch.downcast_ref::<Registry>().expect("the registry is the subscriber");
            let span = registry.span(&next.id().expect("an enabled span")).expect("a recorded span");
            assert_eq!(span.name(), "batch");
            assert_eq!(span.parent().map(|p| p.name()), None, "a batch span has no parent");
        });
    });
}
