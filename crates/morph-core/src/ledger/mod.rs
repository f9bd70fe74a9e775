//! The ledger: what both drivers must agree on, written once. It owns the policy; a driver
//! reports what happened (an arrival, a finished batch or iteration, a launch come up, a client
//! gone), the ledger tells the policy, checks each action against the state ([`rules`]), keeps
//! where every request is, and hands back the [`Effect`]s the driver carries out. It assigns
//! request and instance ids. Pure and synchronous: no clock, no async, no tensors.
//!
//! An action that breaks a rule is a policy bug: with [`OnViolation::Panic`] (tests, the
//! simulator) it panics naming the rule; with [`OnViolation::Refuse`] (the live server) it is
//! not applied, the driver gets [`Effect::Refused`] to log and count, and any waiting request
//! it named is answered with [`Outcome::PolicyError`] so that no client waits forever.

mod book;
mod effect;
#[cfg(test)]
mod properties;
pub mod rules;
#[cfg(test)]
mod tests;

use std::collections::HashMap;

pub use book::Place;
pub use effect::{Effect, Outcome};
pub use rules::Violation;

use crate::host::HostId;
use crate::instance::{InstanceId, InstanceInfo};
use crate::policy::{Action, BatchPlan, Event, Policy, Then};
use crate::request::{Generation, RequestId, RequestInfo, ServiceClass};
use crate::runtime::Computed;
use crate::step::{Pending, StepPlan};
use crate::time::Time;
use crate::unit::{Launched, Ticket, UnitKind, UnitSpec};
use book::{Book, Entry};

/// What to do with an action that breaks a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnViolation {
    Panic,
    Refuse,
}

/// A request as the edge admits it; the ledger gives it its id and arrival time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewRequest {
    pub input_len: u32,
    pub generation: Option<Generation>,
    pub service: Option<ServiceClass>,
}

/// An instance up: its unit and what it runs now.
#[derive(Debug)]
struct InstanceState {
    unit: UnitSpec,
    work: Work,
}

#[derive(Debug)]
enum Work {
    Idle,
    /// A batch started by `Run`; `left` of its requests have not finished yet.
    Batch {
        requests: Vec<RequestId>,
        plan: BatchPlan,
        left: usize,
    },
    /// A continuous batch with these sequences in it (in join order); `awaits_step`: its last
    /// iteration was reported (or it has just started) and the policy has not said its next step.
    Continuous {
        running: Vec<RequestId>,
        awaits_step: bool,
    },
}

pub struct Ledger {
    policy: Box<dyn Policy>,
    on_violation: OnViolation,
    book: Book,
    /// Instances up, by id (ids are handed out in order; a retired one leaves `None`).
    instances: Vec<Option<InstanceState>>,
    launches: HashMap<Ticket, UnitSpec>,
    refused: u64,
    /// The policy's answer to the event being handled (kept to reuse its allocation).
    actions: Vec<Action>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger")
            .field("policy", &self.policy.name())
            .field("open", &self.book.open())
            .field("instances", &self.instances().count())
            .field("launching", &self.launches.len())
            .finish_non_exhaustive()
    }
}

impl Ledger {
    pub fn new(policy: Box<dyn Policy>, on_violation: OnViolation) -> Self {
        Self {
            policy,
            on_violation,
            book: Book::default(),
            instances: Vec::new(),
            launches: HashMap::new(),
            refused: 0,
            actions: Vec::new(),
        }
    }

    pub fn policy(&self) -> &dyn Policy {
        self.policy.as_ref()
    }

    /// Instances up, with their units.
    pub fn instances(&self) -> impl Iterator<Item = (InstanceId, &UnitSpec)> {
        self.instances
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_ref().map(|s| (InstanceId(i as u32), &s.unit)))
    }

    /// Whether `instance` is up and runs nothing now.
    pub fn is_idle(&self, instance: InstanceId) -> bool {
        self.state(instance).is_some_and(|state| matches!(state.work, Work::Idle))
    }

    pub fn unit(&self, instance: InstanceId) -> Option<&UnitSpec> {
        self.state(instance).map(|s| &s.unit)
    }

    /// Device slots held: instances up plus launches pending.
    pub fn slots(&self) -> usize {
        self.instances().count() + self.launches.len()
    }

    /// Where a request is, while it is not answered.
    pub fn place(&self, request: RequestId) -> Option<Place> {
        self.book.get(request).map(|e| e.place)
    }

    /// What the policy was told of a request, while it is not answered.
    pub fn request(&self, request: RequestId) -> Option<&RequestInfo> {
        self.book.get(request).map(|e| &e.info)
    }

    /// Requests admitted and not yet answered (none, once a run has drained).
    pub fn unanswered(&self) -> Vec<RequestId> {
        self.book.unanswered().map(|e| e.info.id).collect()
    }

    /// Actions refused for breaking a rule.
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// An instance of the initial layout on `host`, loaded and idle.
    pub fn add_instance(
        &mut self,
        now: Time,
        unit: UnitSpec,
        host: HostId,
        effects: &mut Vec<Effect>,
    ) -> InstanceId {
        self.up(now, unit, host, None, effects)
    }

    /// The launch `launched.ticket` is up; `None` if no launch has that ticket (a driver bug).
    pub fn launch_up(
        &mut self,
        now: Time,
        launched: Launched,
        effects: &mut Vec<Effect>,
    ) -> Option<InstanceId> {
        let unit = self.launches.remove(&launched.ticket)?;
        Some(self.up(now, unit, launched.host, Some(launched), effects))
    }

    pub fn launch_failed(&mut self, now: Time, ticket: Ticket, reason: String, effects: &mut Vec<Effect>) {
        if let Some(unit) = self.launches.remove(&ticket) {
            self.tell(now, Event::LaunchFailed { ticket, unit, reason }, effects);
        }
    }

    /// Admits a request and tells the policy; returns its id.
    pub fn arrive(&mut self, now: Time, new: NewRequest, effects: &mut Vec<Effect>) -> RequestId {
        let id = self.book.next_id();
        let NewRequest { input_len, generation, service } = new;
        let info = RequestInfo { id, input_len, arrival: now, generation, service };
        self.book.insert(Entry {
            info,
            place: Place::Waiting { stage: 0 },
            cancelled: false,
            retried: false,
        });
        self.tell(now, Event::Arrival(info), effects);
        id
    }

    /// The encoder batch on `instance` ended (`failed`: with the engine's error; `computed`: as
    /// [`Event::BatchDone`] has it).
    pub fn batch_done(
        &mut self,
        now: Time,
        instance: InstanceId,
        failed: bool,
        computed: Option<Computed>,
        effects: &mut Vec<Effect>,
    ) {
        let Some(state) = self.state_mut(instance) else { return };
        let Work::Batch { requests, plan, .. } = std::mem::replace(&mut state.work, Work::Idle) else {
            return;
        };
        let next = state.unit.stage_index() + 1;
        let mut gone = Vec::new();
        for &r in &requests {
            let Some(entry) = self.book.get_mut(r) else { continue };
            if plan.then == Then::NextStage && !failed && !entry.cancelled {
                entry.place = Place::Waiting { stage: next };
                effects.push(Effect::Forward { request: r, stage: next });
            } else {
                let outcome = self.finish(r, failed);
                if outcome == Outcome::Cancelled && plan.then == Then::NextStage && !failed {
                    gone.push(r);
                }
                effects.push(Effect::Answer { request: r, outcome });
            }
        }
        self.tell(now, Event::BatchDone { instance, requests, failed, computed }, effects);
        for request in gone {
            self.tell(now, Event::Cancelled { request }, effects);
        }
    }

    /// The worker of `instance` is gone: the instance leaves (the driver stops what is left of
    /// its worker), each request of the batch it ran waits again at its stage the first time
    /// this happens to it (retried once) and is answered failed the second time, and the policy
    /// hears all of it in one event, so it never names the instance again.
    pub fn instance_lost(&mut self, now: Time, instance: InstanceId, effects: &mut Vec<Effect>) {
        let Some(state) = self.state_mut(instance) else { return };
        let stage = state.unit.stage_index();
        let requests = match std::mem::replace(&mut state.work, Work::Idle) {
            Work::Batch { requests, .. } | Work::Continuous { running: requests, .. } => requests,
            Work::Idle => Vec::new(),
        };
        let (mut retried, mut failed) = (Vec::new(), Vec::new());
        for r in requests {
            match self.book.get_mut(r) {
                Some(entry) if !entry.cancelled && !entry.retried => {
                    entry.retried = true;
                    entry.place = Place::Waiting { stage };
                    retried.push(r);
                }
                Some(_) => {
                    let outcome = self.finish(r, true);
                    effects.push(Effect::Answer { request: r, outcome });
                    failed.push(r);
                }
                None => {}
            }
        }
        self.instances[instance.0 as usize] = None;
        effects.push(Effect::Retire { instance });
        self.tell(now, Event::InstanceLost { instance, retried, failed }, effects);
    }

    /// An iteration of the generations on `instance` ended and `finished` left the batch
    /// (`failed`: the engine failed them); `pending`: what the generations left would feed next,
    /// as the engine says. A continuous batch reports it to the policy, whose [`Action::Step`]
    /// is the next iteration; a static batch steps on at once over all its generations and
    /// reports its end.
    pub fn iteration_done(
        &mut self,
        now: Time,
        instance: InstanceId,
        finished: &[RequestId],
        failed: bool,
        pending: &[Pending],
        effects: &mut Vec<Effect>,
    ) {
        for &r in finished {
            let outcome = self.finish(r, failed);
            effects.push(Effect::Answer { request: r, outcome });
        }
        let Some(state) = self.state_mut(instance) else { return };
        match &mut state.work {
            Work::Continuous { running, awaits_step } => {
                running.retain(|r| !finished.contains(r));
                *awaits_step = !running.is_empty();
                let pending = self.pending(instance, pending);
                let event = Event::SequencesDone { instance, requests: finished.to_vec(), pending };
                self.tell(now, event, effects);
                let Some(state) = self.state_mut(instance) else { return };
                if matches!(&state.work, Work::Continuous { running, .. } if running.is_empty()) {
                    state.work = Work::Idle;
                    self.tell(
                        now,
                        Event::BatchDone { instance, requests: Vec::new(), failed, computed: None },
                        effects,
                    );
                }
            }
            Work::Batch { left, requests, .. } => {
                *left = left.saturating_sub(finished.len());
                if *left > 0 {
                    effects.push(Effect::Step { instance, plan: StepPlan::all(requests) });
                    return;
                }
                if let Work::Batch { requests, .. } = std::mem::replace(&mut state.work, Work::Idle) {
                    self.tell(now, Event::BatchDone { instance, requests, failed, computed: None }, effects);
                }
            }
            Work::Idle => {}
        }
    }

    /// Every generation in `instance`'s continuous batch, in join order, with what it would feed
    /// next: as the engine `reported`, or (joined after the engine reported) its whole prompt.
    fn pending(&self, instance: InstanceId, reported: &[Pending]) -> Vec<Pending> {
        let Some(Work::Continuous { running, .. }) = self.state(instance).map(|s| &s.work) else {
            return Vec::new();
        };
        let fresh = |r: RequestId| Pending::fresh(r, self.book.get(r).map_or(0, |e| e.info.input_len));
        running
            .iter()
            .map(|&r| reported.iter().find(|p| p.request == r).copied().unwrap_or_else(|| fresh(r)))
            .collect()
    }

    /// The client of `request` went away. Unknown or answered requests are ignored.
    pub fn cancel(&mut self, now: Time, request: RequestId, effects: &mut Vec<Effect>) {
        let Some(entry) = self.book.get_mut(request) else { return };
        match entry.place {
            Place::Waiting { .. } => {
                self.book.remove(request);
                effects.push(Effect::Answer { request, outcome: Outcome::Cancelled });
                self.tell(now, Event::Cancelled { request }, effects);
            }
            Place::Running(instance) if !entry.cancelled => {
                entry.cancelled = true;
                if self.state(instance).is_some_and(|s| s.unit.kind == UnitKind::Generation) {
                    effects.push(Effect::Cancel { instance, request });
                }
            }
            Place::Running(_) => {}
        }
    }

    pub fn tick(&mut self, now: Time, effects: &mut Vec<Effect>) {
        self.tell(now, Event::Tick, effects);
    }

    /// A host joined, left or came back with `slots` device slots.
    pub fn slots_changed(&mut self, now: Time, host: HostId, slots: u16, effects: &mut Vec<Effect>) {
        self.tell(now, Event::SlotsChanged { host, slots }, effects);
    }

    fn up(
        &mut self,
        now: Time,
        unit: UnitSpec,
        host: HostId,
        launch: Option<Launched>,
        effects: &mut Vec<Effect>,
    ) -> InstanceId {
        let id = InstanceId(self.instances.len() as u32);
        self.instances.push(Some(InstanceState { unit, work: Work::Idle }));
        let instance = InstanceInfo { id, unit, host };
        self.tell(now, Event::InstanceUp { instance, launch }, effects);
        id
    }

    fn state(&self, id: InstanceId) -> Option<&InstanceState> {
        self.instances.get(id.0 as usize)?.as_ref()
    }

    /// `instance`'s state, or the violation of an `action` naming an instance that is not up.
    fn known(&self, instance: InstanceId, action: &'static str) -> Result<&InstanceState, Violation> {
        self.state(instance).ok_or(Violation::UnknownInstance { action, instance })
    }

    /// Asks the cache for what the ledger and the policy keep of `instance`: the first of two
    /// hints for a driver that knows which batches end next (they change nothing).
    pub fn prefetch_instance(&self, instance: InstanceId) {
        if let Some(state) = self.instances.get(instance.0 as usize) {
            crate::prefetch::prefetch(state);
        }
        self.policy.prefetch(instance);
    }

    /// Asks the cache for the ledger's record of the instance the policy would start the next
    /// arrival on ([`Policy::next_start`]) and names it, for the driver's own records.
    pub fn prefetch_next_start(&self) -> Option<InstanceId> {
        let next = self.policy.next_start()?;
        if let Some(state) = self.instances.get(next.0 as usize) {
            crate::prefetch::prefetch(state);
        }
        Some(next)
    }

    /// Asks the cache for the list of the batch on `instance` and for `first`, its first
    /// request: the second hint, once the instance's own record is in the cache.
    pub fn prefetch_batch(&self, instance: InstanceId, first: RequestId) {
        let state = self.instances.get(instance.0 as usize).and_then(Option::as_ref);
        if let Some(InstanceState { work: Work::Batch { requests, .. }, .. }) = state
            && let Some(head) = requests.first()
        {
            crate::prefetch::prefetch(head);
        }
        self.book.prefetch(first);
    }

    fn state_mut(&mut self, id: InstanceId) -> Option<&mut InstanceState> {
        self.instances.get_mut(id.0 as usize)?.as_mut()
    }

    /// Takes a request that left its batch out of the book; its outcome.
    fn finish(&mut self, request: RequestId, failed: bool) -> Outcome {
        match self.book.remove(request) {
            Some(e) if e.cancelled => Outcome::Cancelled,
            _ if failed => Outcome::Failed,
            _ => Outcome::Done,
        }
    }

    /// Tells the policy `event` and applies its actions, refusing those that break a rule.
    fn tell(&mut self, now: Time, event: Event, effects: &mut Vec<Effect>) {
        let mut actions = std::mem::take(&mut self.actions);
        self.policy.on_event(now, event, &mut actions);
        for action in actions.drain(..) {
            match self.check(&action) {
                Ok(()) => self.apply(action, effects),
                Err(violation) => self.refuse(action, violation, effects),
            }
        }
        self.actions = actions;
    }

    /// Whether `action` keeps the rules against the state as it is.
    fn check(&self, action: &Action) -> Result<(), Violation> {
        match action {
            Action::Run { instance, requests, plan } => {
                let instance = *instance;
                let state = self.known(instance, "Run")?;
                if !matches!(state.work, Work::Idle) {
                    return Err(Violation::InstanceBusy { instance });
                }
                rules::check_plan(instance, &state.unit, *plan)?;
                rules::check_batch(&self.book, instance, &state.unit, requests, 0, "Run")
            }
            Action::Join { instance, requests } => {
                let instance = *instance;
                let state = self.known(instance, "Join")?;
                let already = match (&state.work, state.unit.kind) {
                    (_, UnitKind::Batch) => Err(Violation::NotContinuous { instance, why: "is an encoder" }),
                    (Work::Batch { .. }, _) => {
                        Err(Violation::NotContinuous { instance, why: "runs a static batch" })
                    }
                    (Work::Continuous { running, .. }, _) => Ok(running.len()),
                    (Work::Idle, _) => Ok(0),
                }?;
                rules::check_batch(&self.book, instance, &state.unit, requests, already, "Join")
            }
            Action::Step { instance, plan } => {
                let state = self.known(*instance, "Step")?;
                match &state.work {
                    Work::Continuous { running, awaits_step: true } => {
                        rules::check_step(*instance, running, plan)
                    }
                    _ => Err(Violation::NoStepAwaited { instance: *instance }),
                }
            }
            Action::Drop { request, .. } => match self.place(*request) {
                Some(Place::Waiting { .. }) => Ok(()),
                _ => Err(Violation::NotWaiting { request: *request }),
            },
            Action::Launch { ticket, .. } if self.launches.contains_key(ticket) => {
                Err(Violation::TicketInUse { ticket: *ticket })
            }
            Action::Launch { .. } | Action::Preload { .. } => Ok(()),
            Action::Retire { instance } => {
                let instance = *instance;
                let state = self.known(instance, "Retire")?;
                match state.work {
                    Work::Idle => Ok(()),
                    _ => Err(Violation::RetireBusy { instance }),
                }
            }
        }
    }

    /// Carries out an action [`Self::check`] passed; a batch's list moves into its instance's
    /// work (one copy goes to the driver).
    fn apply(&mut self, action: Action, effects: &mut Vec<Effect>) {
        match action {
            Action::Run { instance, requests, plan } => {
                self.place_running(&requests, instance);
                effects.push(Effect::Run { instance, requests: requests.clone(), plan });
                if let Some(state) = self.state_mut(instance) {
                    // A static batch of generations steps over all of them from its first step.
                    if state.unit.kind == UnitKind::Generation {
                        effects.push(Effect::Step { instance, plan: StepPlan::all(&requests) });
                    }
                    let left = requests.len();
                    state.work = Work::Batch { requests, plan, left };
                }
            }
            Action::Join { instance, requests } => {
                self.place_running(&requests, instance);
                effects.push(Effect::Join { instance, requests: requests.clone() });
                if let Some(state) = self.state_mut(instance) {
                    match &mut state.work {
                        Work::Continuous { running, awaits_step } => {
                            // Emptied by the report being answered: the engine waits for a step.
                            *awaits_step |= running.is_empty();
                            running.extend_from_slice(&requests);
                        }
                        work => *work = Work::Continuous { running: requests, awaits_step: true },
                    }
                }
            }
            Action::Step { instance, plan } => {
                if let Some(InstanceState { work: Work::Continuous { awaits_step, .. }, .. }) =
                    self.state_mut(instance)
                {
                    *awaits_step = false;
                }
                effects.push(Effect::Step { instance, plan });
            }
            Action::Drop { request, reason } => {
                self.book.remove(request);
                effects.push(Effect::Answer { request, outcome: Outcome::Dropped(reason) });
            }
            Action::Launch { ticket, unit, host } => {
                self.launches.insert(ticket, unit);
                effects.push(Effect::Launch { ticket, unit, host });
            }
            Action::Retire { instance } => {
                self.instances[instance.0 as usize] = None;
                effects.push(Effect::Retire { instance });
            }
            Action::Preload { unit, host } => effects.push(Effect::Preload { unit, host }),
        }
    }

    fn place_running(&mut self, requests: &[RequestId], instance: InstanceId) {
        for &r in requests {
            if let Some(entry) = self.book.get_mut(r) {
                entry.place = Place::Running(instance);
            }
        }
    }

    fn refuse(&mut self, action: Action, violation: Violation, effects: &mut Vec<Effect>) {
        if self.on_violation == OnViolation::Panic {
            panic!("policy {} broke a ledger rule: {violation} ({action:?})", self.policy.name());
        }
        self.refused += 1;
        let named: &[RequestId] = match &action {
            Action::Run { requests, .. } | Action::Join { requests, .. } => requests,
            Action::Drop { request, .. } => std::slice::from_ref(request),
            Action::Launch { .. } | Action::Retire { .. } | Action::Step { .. } | Action::Preload { .. } => {
                &[]
            }
        };
        for &request in named {
            if matches!(self.place(request), Some(Place::Waiting { .. })) {
                self.book.remove(request);
                effects.push(Effect::Answer { request, outcome: Outcome::PolicyError });
            }
        }
        effects.push(Effect::Refused(violation));
    }
}
