//! One test per ledger rule (each forbidden action is refused) and the semantics of hand-off,
//! cancellation and iteration reports.

use super::*;
use crate::fixtures::Puppet;
use crate::policy::DropReason;
use crate::runtime::RuntimeSpec;
use crate::token_plan::TokenPlan;
use crate::unit::{ModelId, StageSpec, StartKind};

struct Fixture {
    ledger: Ledger,
    puppet: Puppet,
}

fn encoder() -> UnitSpec {
    UnitSpec::batch(RuntimeSpec::dynamic(64, 2))
}

fn decoder() -> UnitSpec {
    UnitSpec::generation(RuntimeSpec::dynamic(64, 2))
}

fn stage(index: u16) -> UnitSpec {
    let s = StageSpec::even(ModelId(0), index, 2, 6);
    encoder().with_stage(s)
}

const EMBED: NewRequest = NewRequest { input_len: 10, generation: None, service: None };
const GENERATE: NewRequest = NewRequest {
    input_len: 10,
    generation: Some(Generation { max_tokens: 8, predicted: None, cached: 0 }),
    service: None,
};

impl Fixture {
    /// A refusing ledger with these units up.
    fn new(units: &[UnitSpec]) -> Self {
        let puppet = Puppet::default();
        let mut ledger = Ledger::new(Box::new(puppet.clone()), OnViolation::Refuse);
        for unit in units {
            ledger.add_instance(Time::ZERO, *unit, HostId(0), &mut Vec::new());
        }
        Self { ledger, puppet }
    }

    /// Makes the policy answer the next event with `actions`.
    fn will(&self, actions: Vec<Action>) {
        *self.puppet.next.lock().unwrap() = actions;
    }

    fn arrive(&mut self, new: NewRequest, actions: Vec<Action>) -> Vec<Effect> {
        self.will(actions);
        let mut effects = Vec::new();
        self.ledger.arrive(Time(1), new, &mut effects);
        effects
    }

    /// Arrivals the policy keeps waiting.
    fn waiting(&mut self, new: NewRequest, n: usize) {
        for _ in 0..n {
            self.arrive(new, Vec::new());
        }
    }

    /// The effects of a tick on which the policy does `actions`.
    fn on_tick(&mut self, actions: Vec<Action>) -> Vec<Effect> {
        self.will(actions);
        let mut effects = Vec::new();
        self.ledger.tick(Time(2), &mut effects);
        effects
    }

    fn events(&self) -> Vec<Event> {
        std::mem::take(&mut self.puppet.seen.lock().unwrap())
    }
}

fn r(ids: &[u64]) -> Vec<RequestId> {
    ids.iter().map(|i| RequestId(*i)).collect()
}

fn run(instance: u32, ids: &[u64]) -> Action {
    Action::Run { instance: InstanceId(instance), requests: r(ids), plan: BatchPlan::FINISH }
}

fn join(instance: u32, ids: &[u64]) -> Action {
    Action::Join { instance: InstanceId(instance), requests: r(ids) }
}

/// A step on `instance` feeding each of `ids` one token.
fn step(instance: u32, ids: &[u64]) -> Action {
    let feeds = r(ids).into_iter().map(|request| crate::step::StepFeed { request, tokens: 1 }).collect();
    Action::Step { instance: InstanceId(instance), plan: StepPlan { feeds } }
}

fn step_effect(instance: u32, ids: &[u64]) -> Effect {
    let Action::Step { instance, plan } = step(instance, ids) else { unreachable!() };
    Effect::Step { instance, plan }
}

/// `ids` decoding (their prompts fed), in this order.
fn decoding(ids: &[u64]) -> Vec<Pending> {
    r(ids).into_iter().map(|request| Pending { request, prompt_left: 0, piece: 0 }).collect()
}

/// The one violation refused among `effects`.
fn refused(effects: &[Effect]) -> Violation {
    let found: Vec<&Violation> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::Refused(v) => Some(v),
            _ => None,
        })
        .collect();
    assert_eq!(found.len(), 1, "{effects:?}");
    found[0].clone()
}

#[test]
fn a_run_on_an_instance_that_is_not_up_is_refused() {
    let mut f = Fixture::new(&[encoder()]);
    let effects = f.arrive(EMBED, vec![run(7, &[0])]);
    assert_eq!(refused(&effects), Violation::UnknownInstance { action: "Run", instance: InstanceId(7) });
    // The request it named is answered, not forgotten.
    assert!(effects.contains(&Effect::Answer { request: RequestId(0), outcome: Outcome::PolicyError }));
    assert!(f.ledger.unanswered().is_empty());
    assert_eq!(f.ledger.refused(), 1);
}

#[test]
fn a_run_on_a_busy_instance_is_refused() {
    let mut f = Fixture::new(&[encoder()]);
    f.arrive(EMBED, vec![run(0, &[0])]);
    let effects = f.arrive(EMBED, vec![run(0, &[1])]);
    assert_eq!(refused(&effects), Violation::InstanceBusy { instance: InstanceId(0) });
    assert_eq!(f.ledger.place(RequestId(0)), Some(Place::Running(InstanceId(0))));
}

#[test]
fn an_empty_batch_is_refused() {
    let mut f = Fixture::new(&[encoder()]);
    let effects = f.on_tick(vec![run(0, &[])]);
    assert_eq!(refused(&effects), Violation::EmptyBatch { action: "Run", instance: InstanceId(0) });
}

#[test]
fn more_rows_than_the_runtime_takes_are_refused() {
    let mut f = Fixture::new(&[encoder()]);
    f.waiting(EMBED, 3);
    let effects = f.on_tick(vec![run(0, &[0, 1, 2])]);
    assert_eq!(refused(&effects), Violation::TooManyRows { instance: InstanceId(0), rows: 3, max: 2 });
}

#[test]
fn a_request_longer_than_the_runtime_is_refused() {
    let mut f = Fixture::new(&[encoder()]);
    let effects = f.arrive(NewRequest { input_len: 65, ..EMBED }, vec![run(0, &[0])]);
    let expected =
        Violation::TooLong { request: RequestId(0), instance: InstanceId(0), len: 65, max_len: 64 };
    assert_eq!(refused(&effects), expected);
    // A fixed shape's dynamic fallback takes it, up to the fallback's length.
    let fallback = || Fixture::new(&[UnitSpec::batch(RuntimeSpec::fixed(64, 2).with_fallback(128))]);
    let effects = fallback().arrive(NewRequest { input_len: 65, ..EMBED }, vec![run(0, &[0])]);
    assert!(effects.iter().all(|e| !matches!(e, Effect::Refused(_))), "{effects:?}");
    let effects = fallback().arrive(NewRequest { input_len: 129, ..EMBED }, vec![run(0, &[0])]);
    let expected =
        Violation::TooLong { request: RequestId(0), instance: InstanceId(0), len: 129, max_len: 128 };
    assert_eq!(refused(&effects), expected);
}

#[test]
fn a_request_run_twice_or_unknown_is_refused() {
    let mut f = Fixture::new(&[encoder(), encoder()]);
    f.arrive(EMBED, vec![run(0, &[0])]);
    let effects = f.on_tick(vec![run(1, &[0])]);
    assert_eq!(refused(&effects), Violation::NotWaiting { request: RequestId(0) });
    let effects = f.on_tick(vec![run(1, &[9])]);
    assert_eq!(refused(&effects), Violation::NotWaiting { request: RequestId(9) });
    // The running request was not touched by the refusals.
    assert_eq!(f.ledger.place(RequestId(0)), Some(Place::Running(InstanceId(0))));
}

#[test]
fn a_request_twice_in_one_batch_is_refused() {
    let mut f = Fixture::new(&[encoder()]);
    let effects = f.arrive(EMBED, vec![run(0, &[0, 0])]);
    assert_eq!(refused(&effects), Violation::Duplicate { request: RequestId(0) });
}

#[test]
fn a_generation_on_an_encoder_and_an_embedding_on_a_decoder_are_refused() {
    let mut f = Fixture::new(&[encoder(), decoder()]);
    let effects = f.arrive(GENERATE, vec![run(0, &[0])]);
    let expected = Violation::WrongKind {
        request: RequestId(0),
        generation: true,
        instance: InstanceId(0),
        unit: UnitKind::Batch,
    };
    assert_eq!(refused(&effects), expected);
    let effects = f.arrive(EMBED, vec![join(1, &[1])]);
    assert!(matches!(refused(&effects), Violation::WrongKind { generation: false, .. }));
}

#[test]
fn a_request_on_a_stage_it_has_not_reached_is_refused() {
    let mut f = Fixture::new(&[stage(0), stage(1)]);
    let effects = f.arrive(EMBED, vec![run(1, &[0])]);
    let expected =
        Violation::WrongStage { request: RequestId(0), waiting_for: 0, instance: InstanceId(1), stage: 1 };
    assert_eq!(refused(&effects), expected);
}

#[test]
fn handing_on_from_the_last_stage_or_a_whole_model_is_refused() {
    let mut f = Fixture::new(&[stage(0), stage(1), encoder()]);
    f.waiting(EMBED, 1);
    let whole = Action::Run { instance: InstanceId(2), requests: r(&[0]), plan: BatchPlan::next_stage() };
    assert_eq!(refused(&f.on_tick(vec![whole])), Violation::NoNextStage { instance: InstanceId(2) });
    f.waiting(EMBED, 1);
    let effects = f.on_tick(vec![Action::Run {
        instance: InstanceId(0),
        requests: r(&[1]),
        plan: BatchPlan::next_stage(),
    }]);
    assert!(!effects.iter().any(|e| matches!(e, Effect::Refused(_))));
    let mut effects = Vec::new();
    f.ledger.batch_done(Time(3), InstanceId(0), false, None, &mut effects);
    assert_eq!(effects, vec![Effect::Forward { request: RequestId(1), stage: 1 }]);
    let last = Action::Run { instance: InstanceId(1), requests: r(&[1]), plan: BatchPlan::next_stage() };
    assert_eq!(refused(&f.on_tick(vec![last])), Violation::NoNextStage { instance: InstanceId(1) });
    assert!(f.ledger.unanswered().is_empty());
}

#[test]
fn a_join_on_an_encoder_or_a_static_batch_is_refused() {
    let mut f = Fixture::new(&[encoder(), decoder()]);
    f.waiting(EMBED, 1);
    let effects = f.on_tick(vec![join(0, &[0])]);
    assert_eq!(refused(&effects), Violation::NotContinuous { instance: InstanceId(0), why: "is an encoder" });
    f.arrive(GENERATE, vec![run(1, &[1])]);
    let effects = f.arrive(GENERATE, vec![join(1, &[2])]);
    assert_eq!(
        refused(&effects),
        Violation::NotContinuous { instance: InstanceId(1), why: "runs a static batch" }
    );
}

#[test]
fn a_join_past_the_runtime_rows_is_refused() {
    let mut f = Fixture::new(&[decoder()]);
    f.arrive(GENERATE, vec![join(0, &[0])]);
    f.arrive(GENERATE, vec![join(0, &[1])]);
    let effects = f.arrive(GENERATE, vec![join(0, &[2])]);
    assert_eq!(refused(&effects), Violation::TooManyRows { instance: InstanceId(0), rows: 3, max: 2 });
}

#[test]
fn only_idle_instances_are_retired() {
    let mut f = Fixture::new(&[encoder()]);
    f.arrive(EMBED, vec![run(0, &[0])]);
    let retire = Action::Retire { instance: InstanceId(0) };
    assert_eq!(refused(&f.on_tick(vec![retire.clone()])), Violation::RetireBusy { instance: InstanceId(0) });
    f.ledger.batch_done(Time(3), InstanceId(0), false, None, &mut Vec::new());
    assert_eq!(f.on_tick(vec![retire.clone()]), vec![Effect::Retire { instance: InstanceId(0) }]);
    let gone = Violation::UnknownInstance { action: "Retire", instance: InstanceId(0) };
    assert_eq!(refused(&f.on_tick(vec![retire])), gone);
}

#[test]
fn a_ticket_still_pending_is_not_reused_and_ups_are_matched_by_ticket() {
    let mut f = Fixture::new(&[]);
    let launch = |unit| Action::Launch { ticket: Ticket(1), unit, host: None };
    f.on_tick(vec![launch(encoder())]);
    assert_eq!(refused(&f.on_tick(vec![launch(decoder())])), Violation::TicketInUse { ticket: Ticket(1) });
    assert_eq!(f.ledger.slots(), 1);
    f.events();
    let up = Launched { ticket: Ticket(1), host: HostId(2), start: StartKind::Warm, took: 5 };
    let id = f.ledger.launch_up(Time(3), up, &mut Vec::new());
    assert_eq!(id, Some(InstanceId(0)));
    let info = InstanceInfo { id: InstanceId(0), unit: encoder(), host: HostId(2) };
    assert_eq!(f.events(), vec![Event::InstanceUp { instance: info, launch: Some(up) }]);
    assert_eq!(f.ledger.launch_up(Time(4), up, &mut Vec::new()), None, "a ticket comes up once");
}

#[test]
fn only_waiting_requests_are_dropped() {
    let mut f = Fixture::new(&[encoder()]);
    let reason = DropReason::DeadlineUnreachable { within: 600_000_000 };
    f.arrive(EMBED, vec![run(0, &[0])]);
    let drop = |id| Action::Drop { request: RequestId(id), reason: reason.clone() };
    assert_eq!(refused(&f.on_tick(vec![drop(0)])), Violation::NotWaiting { request: RequestId(0) });
    let effects = f.arrive(EMBED, vec![drop(1)]);
    assert_eq!(
        effects,
        vec![Effect::Answer { request: RequestId(1), outcome: Outcome::Dropped(reason.clone()) }]
    );
    assert_eq!(reason.to_string(), "its deadline (600 ms after arrival) can no longer be met");
}

#[test]
#[should_panic(expected = "policy puppet broke a ledger rule: Run on instance 3, which is not up")]
fn a_strict_ledger_fails_loudly() {
    let puppet = Puppet::default();
    let mut ledger = Ledger::new(Box::new(puppet.clone()), OnViolation::Panic);
    *puppet.next.lock().unwrap() = vec![run(3, &[0])];
    ledger.arrive(Time(1), EMBED, &mut Vec::new());
}

#[test]
fn a_cancelled_waiting_request_leaves_and_the_policy_is_told() {
    let mut f = Fixture::new(&[encoder()]);
    f.waiting(EMBED, 1);
    f.events();
    let mut effects = Vec::new();
    f.ledger.cancel(Time(2), RequestId(0), &mut effects);
    assert_eq!(effects, vec![Effect::Answer { request: RequestId(0), outcome: Outcome::Cancelled }]);
    assert_eq!(f.events(), vec![Event::Cancelled { request: RequestId(0) }]);
    // A second cancel, or one for an answered request, changes nothing.
    f.ledger.cancel(Time(3), RequestId(0), &mut effects);
    assert_eq!(effects.len(), 1);
    assert!(f.events().is_empty());
}

#[test]
fn a_cancelled_embedding_finishes_its_batch_and_is_discarded() {
    let mut f = Fixture::new(&[encoder()]);
    f.waiting(EMBED, 2);
    f.on_tick(vec![run(0, &[0, 1])]);
    let mut effects = Vec::new();
    f.ledger.cancel(Time(3), RequestId(1), &mut effects);
    assert!(effects.is_empty(), "nothing stops an encoder batch");
    f.ledger.batch_done(Time(4), InstanceId(0), false, None, &mut effects);
    assert_eq!(
        effects,
        vec![
            Effect::Answer { request: RequestId(0), outcome: Outcome::Done },
            Effect::Answer { request: RequestId(1), outcome: Outcome::Cancelled },
        ]
    );
}

#[test]
fn a_request_cancelled_between_stages_is_reported_after_its_batch() {
    let mut f = Fixture::new(&[stage(0), stage(1)]);
    f.waiting(EMBED, 1);
    let next = Action::Run { instance: InstanceId(0), requests: r(&[0]), plan: BatchPlan::next_stage() };
    f.on_tick(vec![next]);
    f.ledger.cancel(Time(3), RequestId(0), &mut Vec::new());
    f.events();
    let mut effects = Vec::new();
    f.ledger.batch_done(Time(4), InstanceId(0), false, None, &mut effects);
    assert_eq!(effects, vec![Effect::Answer { request: RequestId(0), outcome: Outcome::Cancelled }]);
    assert_eq!(
        f.events(),
        vec![
            Event::BatchDone { instance: InstanceId(0), requests: r(&[0]), failed: false, computed: None },
            Event::Cancelled { request: RequestId(0) },
        ]
    );
}

#[test]
fn a_running_generation_is_stopped_and_reported_finished() {
    let mut f = Fixture::new(&[decoder()]);
    f.arrive(GENERATE, vec![join(0, &[0])]);
    f.arrive(GENERATE, vec![join(0, &[1])]);
    let mut effects = Vec::new();
    f.ledger.cancel(Time(2), RequestId(1), &mut effects);
    assert_eq!(effects, vec![Effect::Cancel { instance: InstanceId(0), request: RequestId(1) }]);
    f.events();
    effects.clear();
    f.will(vec![step(0, &[0])]);
    f.ledger.iteration_done(Time(3), InstanceId(0), &r(&[1]), false, &decoding(&[0]), &mut effects);
    assert_eq!(
        effects,
        vec![Effect::Answer { request: RequestId(1), outcome: Outcome::Cancelled }, step_effect(0, &[0])]
    );
    let pending = decoding(&[0]);
    assert_eq!(
        f.events(),
        vec![Event::SequencesDone { instance: InstanceId(0), requests: r(&[1]), pending }]
    );
}

#[test]
fn a_step_is_legal_once_per_report_and_only_over_the_batch() {
    let mut f = Fixture::new(&[decoder()]);
    f.waiting(GENERATE, 3);
    let effects = f.on_tick(vec![join(0, &[0, 1]), step(0, &[0, 1]), step(0, &[0])]);
    assert_eq!(
        refused(&effects),
        Violation::NoStepAwaited { instance: InstanceId(0) },
        "one step per report"
    );
    assert!(effects.contains(&step_effect(0, &[0, 1])));
    let mut effects = Vec::new();
    f.will(vec![step(0, &[2])]);
    f.ledger.iteration_done(Time(3), InstanceId(0), &[], false, &decoding(&[0, 1]), &mut effects);
    let outside = Violation::NotInBatch { request: RequestId(2), instance: InstanceId(0) };
    assert_eq!(refused(&effects), outside);
    // Refused, the step is still awaited: the policy's next answer may give it.
    let effects = f.on_tick(vec![step(0, &[1])]);
    assert_eq!(effects, vec![step_effect(0, &[1])]);
    let effects = f.on_tick(vec![Action::Step { instance: InstanceId(0), plan: StepPlan::default() }]);
    assert_eq!(refused(&effects), Violation::NoStepAwaited { instance: InstanceId(0) });
}

#[test]
fn a_report_lists_every_generation_of_the_batch_in_join_order() {
    let mut f = Fixture::new(&[decoder()]);
    f.arrive(GENERATE, vec![join(0, &[0]), step(0, &[0])]);
    f.arrive(GENERATE, vec![join(0, &[1])]);
    f.events();
    // The engine saw only the first: the one joined during its step feeds its whole prompt next.
    let mut effects = Vec::new();
    let reported = [Pending { request: RequestId(0), prompt_left: 4, piece: 2 }];
    f.ledger.iteration_done(Time(3), InstanceId(0), &[], false, &reported, &mut effects);
    let fresh = Pending { request: RequestId(1), prompt_left: GENERATE.input_len, piece: GENERATE.input_len };
    let pending = vec![reported[0], fresh];
    assert_eq!(f.events(), vec![Event::SequencesDone { instance: InstanceId(0), requests: vec![], pending }]);
}

#[test]
fn a_continuous_batch_resumes_after_the_policy_answered_with_its_joins() {
    let mut f = Fixture::new(&[decoder()]);
    f.arrive(GENERATE, vec![join(0, &[0])]);
    f.arrive(GENERATE, vec![join(0, &[1])]);
    f.waiting(GENERATE, 1);
    f.will(vec![join(0, &[2]), step(0, &[1, 2])]);
    let mut effects = Vec::new();
    f.ledger.iteration_done(Time(3), InstanceId(0), &r(&[0]), false, &decoding(&[1]), &mut effects);
    assert_eq!(
        effects,
        vec![
            Effect::Answer { request: RequestId(0), outcome: Outcome::Done },
            Effect::Join { instance: InstanceId(0), requests: r(&[2]) },
            step_effect(0, &[1, 2]),
        ]
    );
    // Emptied: SequencesDone then BatchDone, and no step is awaited (the worker is idle).
    f.events();
    effects.clear();
    f.ledger.iteration_done(Time(4), InstanceId(0), &r(&[1, 2]), false, &[], &mut effects);
    assert_eq!(effects.len(), 2);
    assert_eq!(
        f.events(),
        vec![
            Event::SequencesDone { instance: InstanceId(0), requests: r(&[1, 2]), pending: vec![] },
            Event::BatchDone { instance: InstanceId(0), requests: vec![], failed: false, computed: None },
        ]
    );
}

#[test]
fn a_static_batch_of_generations_answers_each_and_ends_with_its_longest() {
    let mut f = Fixture::new(&[decoder()]);
    f.waiting(GENERATE, 2);
    let plan = BatchPlan { tokens: TokenPlan::Merge(2), then: Then::Finish };
    let effects = f.on_tick(vec![Action::Run { instance: InstanceId(0), requests: r(&[0, 1]), plan }]);
    let every = Effect::Step { instance: InstanceId(0), plan: StepPlan::all(&r(&[0, 1])) };
    assert_eq!(effects.last(), Some(&every), "its first step goes at once, over all of it");
    f.events();
    let mut effects = Vec::new();
    f.ledger.iteration_done(Time(3), InstanceId(0), &r(&[1]), false, &[], &mut effects);
    assert_eq!(effects, vec![Effect::Answer { request: RequestId(1), outcome: Outcome::Done }, every]);
    assert!(f.events().is_empty(), "the policy hears of a static batch only at its end");
    f.ledger.iteration_done(Time(4), InstanceId(0), &r(&[0]), false, &[], &mut effects);
    assert_eq!(
        f.events(),
        vec![Event::BatchDone {
            instance: InstanceId(0),
            requests: r(&[0, 1]),
            failed: false,
            computed: None
        }]
    );
}

#[test]
fn a_failed_batch_answers_its_requests_with_the_error_and_hands_none_on() {
    let mut f = Fixture::new(&[stage(0), stage(1)]);
    f.waiting(EMBED, 1);
    f.on_tick(vec![Action::Run {
        instance: InstanceId(0),
        requests: r(&[0]),
        plan: BatchPlan::next_stage(),
    }]);
    let mut effects = Vec::new();
    f.ledger.batch_done(Time(3), InstanceId(0), true, None, &mut effects);
    assert_eq!(effects, vec![Effect::Answer { request: RequestId(0), outcome: Outcome::Failed }]);
    assert!(f.ledger.unanswered().is_empty());
}

#[test]
fn the_book_keeps_only_the_window_of_unanswered_requests() {
    let mut f = Fixture::new(&[encoder()]);
    for i in 0..100 {
        f.arrive(EMBED, vec![run(0, &[i])]);
        f.ledger.batch_done(Time(2), InstanceId(0), false, None, &mut Vec::new());
    }
    assert!(f.ledger.unanswered().is_empty());
    assert_eq!(f.ledger.book.slots_len(), 0);
    f.waiting(EMBED, 1);
    assert_eq!(f.ledger.unanswered(), r(&[100]));
}

#[test]
fn a_lost_instance_leaves_its_batch_is_retried_once_and_it_cannot_be_named_again() {
    let mut f = Fixture::new(&[encoder(), encoder()]);
    f.arrive(EMBED, vec![run(0, &[0])]);
    f.arrive(EMBED, Vec::new());
    f.events();
    f.will(vec![run(0, &[1])]);
    let mut effects = Vec::new();
    f.ledger.instance_lost(Time(3), InstanceId(0), &mut effects);
    assert!(effects.contains(&Effect::Retire { instance: InstanceId(0) }));
    assert!(
        !effects.iter().any(|e| matches!(e, Effect::Answer { request: RequestId(0), .. })),
        "{effects:?}"
    );
    assert_eq!(
        f.events(),
        vec![Event::InstanceLost { instance: InstanceId(0), retried: r(&[0]), failed: Vec::new() }],
        "one event for both: no BatchDone that would invite a Run on the lost instance"
    );
    assert_eq!(refused(&effects), Violation::UnknownInstance { action: "Run", instance: InstanceId(0) });
    assert_eq!(f.ledger.instances().count(), 1);
    assert_eq!(f.ledger.place(RequestId(0)), Some(Place::Waiting { stage: 0 }), "waiting again");
    assert_eq!(f.ledger.place(RequestId(1)), None, "the request the policy misplaced is answered");

    let mut again = Vec::new();
    f.ledger.instance_lost(Time(4), InstanceId(0), &mut again);
    assert!(again.is_empty(), "a second report of the same loss changes nothing: {again:?}");

    f.on_tick(vec![run(1, &[0])]);
    f.events();
    let mut second = Vec::new();
    f.ledger.instance_lost(Time(5), InstanceId(1), &mut second);
    assert!(
        second.contains(&Effect::Answer { request: RequestId(0), outcome: Outcome::Failed }),
        "{second:?}"
    );
    let lost = Event::InstanceLost { instance: InstanceId(1), retried: Vec::new(), failed: r(&[0]) };
    assert_eq!(f.events(), vec![lost], "lost twice: failed, not retried again");
    assert!(f.ledger.unanswered().is_empty());
}
