//! A fleet of fixed-shape instances with per-instance queues: Arlo (§3–§4) and, by preset, its
//! baselines ST, DT, INFaaS-like and the ILB / IG ablations. Requests are bound to an instance
//! on arrival by the multi-level queue; an idle instance runs its own queue in order. With
//! `allocate`, the Runtime Scheduler re-splits the instances among runtimes every period and
//! replaces the fewest, a batch at a time; with scaling on, instances are added and removed.

use std::collections::{BTreeMap, VecDeque};

use morph_core::time::nanos_to_ms;
use morph_core::{
    Action, BatchPlan, DropReason, Event, Gauge, InstanceId, InstanceInfo, LatencyProfile, Launched, Nanos,
    PaddedShape, Policy, RequestId, RequestInfo, RuntimeSpec, ShapeKind, Ticket, Tickets, Time, UnitSpec,
};
use serde_json::json;

use super::config::{ArloConfig, RuntimeSet};
use super::instances::Instances;
use super::scaling::{ScaleDecision, Scaler};
use super::waiting::Waiting;
use crate::arlo::ServiceModel;
use crate::arlo::capacity::{RecentLengths, shortfall};
use crate::arlo::premise::{MeasuredSpeed, fixed_shapes_pay};
use crate::arlo::reallocate::{Accounting, LengthWindow, target};
use crate::arlo::replace::plan;
use crate::arlo::runtime_set::{knee, optimised, staircase};
use crate::arlo::{MultiLevelQueue, replace::Plan};

/// Granularity of optimised runtime bounds, in tokens.
const BOUND_GRANULARITY: u32 = 8;
/// The optimised rule stops adding runtimes when one more gains less than this.
const KNEE_GAIN: f64 = 0.02;
/// Fixed-runtime batches measured before their speed may undo an allocation early.
const PROBE_BATCHES: u64 = 30;

/// What happens to a draining instance once it is empty.
#[derive(Debug, Clone, Copy)]
enum AfterDrain {
    /// Scale in, or the old half of a make-before-break replacement: its slot is released.
    Release,
    /// Replacement break-before-make: a runtime of this shape is launched in its slot.
    Become(RuntimeSpec),
}

/// What a launch is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    ScaleOut,
    /// The new half of a break-before-make replacement (its old half is gone).
    Replacement,
    /// The new half of a make-before-break replacement of this instance, which serves meanwhile.
    Successor(InstanceId),
}

/// A make-before-break replacement whose new instance is up: one of the two will be retired.
#[derive(Debug, Clone, Copy)]
struct HandOver {
    old: InstanceId,
    new: InstanceId,
    since: Time,
}

#[derive(Debug)]
pub struct ArloPolicy {
    name: String,
    config: ArloConfig,
    model: ServiceModel,
    /// Runtimes in ascending max length.
    set: Vec<RuntimeSpec>,
    instances: Instances,
    queue: MultiLevelQueue,
    /// With late binding: requests not yet on an instance, and the idle instances.
    waiting: Waiting,
    scaler: Scaler,
    /// Launched, not up yet, and what for.
    starting: Vec<(Ticket, Purpose)>,
    /// Make-before-break replacements whose new instance serves beside the old one.
    handing_over: Vec<HandOver>,
    /// Lengths of the last few ticks' arrivals: the need the serving instances must cover.
    recent: RecentLengths,
    /// The runtimes' measured speeds against the profile, by shape kind.
    speed: MeasuredSpeed,
    tickets: Tickets,
    draining: BTreeMap<InstanceId, AfterDrain>,
    /// Batch start times, for the scaler's utilisation.
    started: BTreeMap<InstanceId, Time>,
    plan: VecDeque<(InstanceId, RuntimeSpec)>,
    window: LengthWindow,
    window_start: Time,
    next_allocation: Time,
    counters: Counters,
}

#[derive(Debug, Default, serde::Serialize)]
struct Counters {
    allocations: u64,
    replacements: u64,
    scale_outs: u64,
    scale_ins: u64,
    /// Requests sent to a longer runtime than their ideal one.
    demoted: u64,
    /// Requests run on a fixed runtime's dynamic fallback (longer than its shape).
    spilled: u64,
    rejected: u64,
    /// Make-before-break hand-overs that kept the old instance (the need did not allow the new).
    handovers_abandoned: u64,
    /// Allocations that kept DT's layout: fixed shapes would have cost more than the dynamic
    /// runtime at its measured penalty.
    fixed_declined: u64,
}

/// The runtimes of the given ascending max lengths: all fixed-shape, or with `dynamic_longest`
/// the longest one dynamic-shaped; with `dynamic_fallback` (and late binding) the fixed ones
/// fall back to a dynamic shape up to the longest length, and with `pooled_backlog` for the
/// inputs of the shorter classes too, as far as [`demoted_len`] finds it pays at `penalty`.
fn shaped(config: &ArloConfig, lens: &[u32], profile: &LatencyProfile, penalty: f64) -> Vec<RuntimeSpec> {
    let batch = config.batch.max(1);
    let last = lens.len().saturating_sub(1);
    let fallback = match lens.last() {
        Some(&longest) if config.dynamic_fallback && config.late_binding => longest,
        _ => 0,
    };
    lens.iter()
        .enumerate()
        .map(|(i, &l)| {
            if config.dynamic_longest && i == last {
                RuntimeSpec::dynamic(l, batch)
            } else {
                let shorter = if config.pooled_backlog && i > 0 { lens[i - 1] } else { 0 };
                let demoted = demoted_len(profile, shorter, RuntimeSpec::fixed(l, batch), penalty);
                RuntimeSpec::fixed(l, batch).with_fallback(fallback).with_demoted(demoted)
            }
        })
        .collect()
}

/// How far the shorter classes' inputs (up to `shorter` tokens) run on `runtime`'s dynamic
/// fallback rather than padded to its shape: the longest length up to which every length, a
/// full batch of it at the dynamic `penalty`, is priced by `profile` below a batch of the
/// shape (0: none). Short inputs on a flat stretch of the profile cost more at the penalty
/// than padded a little; those further below the shape cost less.
fn demoted_len(profile: &LatencyProfile, shorter: u32, runtime: RuntimeSpec, penalty: f64) -> u32 {
    let padded = profile.latency_ms(PaddedShape { len: runtime.max_len, batch: runtime.max_batch });
    let own_length = |len| penalty * profile.latency_ms(PaddedShape { len, batch: runtime.max_batch });
    (1..=shorter).take_while(|&len| own_length(len) < padded).last().unwrap_or(0)
}

impl ArloPolicy {
    /// `model` gives service times from the profile at the policy's SLO.
    pub fn new(name: impl Into<String>, config: ArloConfig, model: ServiceModel) -> Self {
        let max_len = config.max_len.unwrap_or_else(|| model.profile().max_len().next_multiple_of(8)).max(1);
        let batch = config.batch.max(1);
        // No batch has run yet: the dynamic runtime is taken at the profile's speed.
        let (profile, penalty) = (model.profile(), 1.0);
        let set: Vec<RuntimeSpec> = match config.runtime_set {
            RuntimeSet::Dynamic => vec![RuntimeSpec::dynamic(max_len, batch)],
            RuntimeSet::Explicit if config.max_lens.is_empty() => {
                shaped(&config, &[max_len], profile, penalty)
            }
            RuntimeSet::Explicit => {
                let mut lens = config.max_lens.clone();
                lens.sort_unstable();
                lens.dedup();
                shaped(&config, &lens, profile, penalty)
            }
            RuntimeSet::Staircase | RuntimeSet::Optimised => {
                shaped(&config, &staircase(profile, max_len, config.runtimes), profile, penalty)
            }
        };
        let queue = MultiLevelQueue::with_rule(config.dispatch_params(), config.dispatch);
        let scaler = Scaler::new(config.scaling, model.slo());
        let next_allocation = Time(config.first_allocation_s.nanos());
        let need_ticks =
            (config.need_window_s.0 / config.tick_s.0.max(f64::MIN_POSITIVE)).ceil().max(1.0) as usize;
        Self {
            name: name.into(),
            model,
            set,
            instances: Instances::default(),
            queue,
            waiting: Waiting::new(config.pooled_backlog),
            scaler,
            starting: Vec::new(),
            handing_over: Vec::new(),
            recent: RecentLengths::new(max_len, need_ticks),
            speed: MeasuredSpeed::default(),
            tickets: Tickets::default(),
            draining: BTreeMap::new(),
            started: BTreeMap::new(),
            plan: VecDeque::new(),
            window: LengthWindow::new(max_len),
            window_start: Time::ZERO,
            next_allocation,
            counters: Counters::default(),
            config,
        }
    }

    fn largest(&self) -> RuntimeSpec {
        self.set[self.set.len() - 1]
    }

    /// Instances of each runtime of the set that take requests, in set order, then of any
    /// other runtime still serving (a set changed by the first allocation).
    fn counts(&self) -> Vec<(RuntimeSpec, usize)> {
        let mut runtimes = self.set.clone();
        for (_, i) in self.instances.serving() {
            if !runtimes.contains(&i.runtime) {
                runtimes.push(i.runtime);
            }
        }
        runtimes
            .into_iter()
            .map(|r| (r, self.instances.serving().filter(|(_, i)| i.runtime == r).count()))
            .collect()
    }

    fn arrival(&mut self, request: RequestInfo, actions: &mut Vec<Action>) {
        let reject = |reason| Action::Drop { request: request.id, reason };
        if self.queue_len() >= self.config.max_queue {
            self.counters.rejected += 1;
            actions.push(reject(DropReason::QueueFull { capacity: self.config.max_queue }));
            return;
        }
        let len = request.input_len;
        let ideal = self.set.iter().find(|r| len <= r.max_len).map(|r| r.max_len);
        let bound = if self.config.late_binding {
            ideal.map(|bound| (bound, self.idle_taking(len)))
        } else {
            self.queue.dispatch(request.input_len).map(|id| (0, Some(id)))
        };
        let Some((bound, instance)) = bound else {
            self.counters.rejected += 1;
            let max_len = self.largest().max_len;
            actions.push(reject(DropReason::NoRuntimeFits { len: request.input_len, max_len }));
            return;
        };
        self.window.record(request.input_len);
        self.recent.record(request.input_len);
        let Some(id) = instance else {
            self.waiting.push(bound, request);
            return;
        };
        let runtime = self.instances.map[&id].runtime;
        if len > runtime.max_len {
            self.counters.spilled += 1;
        } else if ideal.is_some_and(|ideal| ideal < runtime.max_len) {
            self.counters.demoted += 1;
        }
        self.instances.enqueue(id, request);
        self.run_next(request.arrival, id, actions);
    }

    /// With late binding, the idle instance a request of `len` tokens starts on at once: the one
    /// with the shortest runtime that fits it (least padding), else, with dynamic fallbacks,
    /// any idle one whose fallback takes it.
    fn idle_taking(&self, len: u32) -> Option<InstanceId> {
        let spill = || self.waiting.idle_longest().filter(|(_, id)| self.instances.map[id].runtime.fits(len));
        self.waiting.idle_fitting(len).or_else(spill).map(|(_, id)| id)
    }

    /// With late binding, an instance with nothing bound to it takes the oldest waiting requests
    /// it fits.
    fn pull(&mut self, id: InstanceId) {
        let Some(instance) = self.instances.map.get(&id) else { return };
        if !self.config.late_binding || instance.draining || !instance.is_empty() {
            return;
        }
        let runtime = instance.runtime;
        if let Some((bound, batch)) = self.waiting.take(runtime) {
            if bound > runtime.max_len {
                self.counters.spilled += batch.len() as u64;
            } else if bound < runtime.max_len {
                self.counters.demoted += batch.len() as u64;
            }
            batch.into_iter().for_each(|r| self.instances.enqueue(id, r));
        }
    }

    fn run_next(&mut self, now: Time, id: InstanceId, actions: &mut Vec<Action>) {
        self.pull(id);
        let Some(max_len) = self.instances.map.get(&id).map(|i| i.runtime.max_len) else { return };
        if let Some(requests) = self.instances.start_next(id) {
            self.waiting.set_busy(max_len, id);
            self.started.insert(id, now);
            actions.push(Action::Run { instance: id, requests, plan: BatchPlan::FINISH });
            return;
        }
        let instance = &self.instances.map[&id];
        if self.draining.contains_key(&id) && instance.is_empty() {
            self.retire(id, actions);
        } else if self.config.late_binding && instance.is_empty() && !instance.draining {
            self.waiting.set_idle(max_len, id);
        }
    }

    /// A queued request's client left: it leaves its queue.
    fn cancelled(&mut self, now: Time, request: RequestId, actions: &mut Vec<Action>) {
        if self.waiting.unqueue(request) {
            return;
        }
        if let Some(id) = self.instances.unqueue(request) {
            self.queue.complete(id);
            self.run_next(now, id, actions);
        }
    }

    fn batch_done(&mut self, now: Time, id: InstanceId, actions: &mut Vec<Action>) {
        if let Some(start) = self.started.remove(&id) {
            self.scaler.batch_done(now, now.since(start));
            self.measure(id, now.since(start));
        }
        for request in self.instances.finish(id) {
            self.queue.complete(id);
            self.scaler.completed(now, now.since(request.arrival));
        }
        self.run_next(now, id, actions);
    }

    /// A batch on `id` took `took`: against the profile's time for its shape.
    fn measure(&mut self, id: InstanceId, took: Nanos) {
        let Some(instance) = self.instances.map.get(&id) else { return };
        if let Some(longest) = instance.running.iter().map(|r| r.input_len).max() {
            let runtime = instance.runtime.running(longest);
            let shape = runtime.padded_shape(longest, instance.running.len() as u32);
            self.speed.observe(runtime.kind, took, self.model.profile().latency(shape));
        }
    }

    /// Stops dispatching to `id`; once empty it is retired (and replaced, if `after` says so).
    fn drain(&mut self, id: InstanceId, after: AfterDrain, actions: &mut Vec<Action>) {
        let Some(instance) = self.instances.map.get_mut(&id) else { return };
        instance.draining = true;
        self.waiting.set_busy(instance.runtime.max_len, id);
        self.queue.remove_instance(id);
        self.draining.insert(id, after);
        if instance.is_empty() {
            self.retire(id, actions);
        }
    }

    fn retire(&mut self, id: InstanceId, actions: &mut Vec<Action>) {
        let after = self.draining.remove(&id);
        self.instances.remove(id);
        actions.push(Action::Retire { instance: id });
        if let Some(AfterDrain::Become(runtime)) = after {
            self.launch(runtime, Purpose::Replacement, actions);
        }
    }

    fn launch(&mut self, runtime: RuntimeSpec, purpose: Purpose, actions: &mut Vec<Action>) {
        let ticket = self.tickets.issue();
        self.starting.push((ticket, purpose));
        actions.push(Action::Launch { ticket, unit: UnitSpec::batch(runtime), host: None });
    }

    /// Requests per second the serving instances, less `without`, cannot serve of the current
    /// need ([`shortfall`]), over the runtime set and any other runtime still serving.
    fn shortfall_without(&self, without: Option<InstanceId>) -> f64 {
        let serving = || self.instances.serving().filter(|(id, _)| Some(*id) != without);
        let mut runtimes: Vec<RuntimeSpec> = self.set.clone();
        runtimes.extend(serving().map(|(_, i)| i.runtime));
        runtimes.sort_by_key(|r| (r.max_len, r.kind == ShapeKind::Dynamic, r.max_batch));
        runtimes.dedup();
        let counts: Vec<usize> =
            runtimes.iter().map(|r| serving().filter(|(_, i)| i.runtime == *r).count()).collect();
        let need = self.recent.need(&runtimes, self.config.tick_s.0);
        let u = self.config.stable_utilisation.unwrap_or(1.0);
        shortfall(&self.model, &runtimes, &counts, &need, u)
    }

    /// Make-before-break: of each replacement whose new instance is up, retires the old one if
    /// the rest covers the current need at least as well as before the new one came (Arlo's
    /// Eq. 4 carry, [`shortfall`]), else waits; past `handover_timeout_s` it retires the new one
    /// instead, whichever leaves the larger capacity. So serving capacity never falls below
    /// what it was before the replacement began, nor below the need.
    fn hand_over(&mut self, now: Time, actions: &mut Vec<Action>) {
        let timeout = self.config.handover_timeout_s.nanos();
        let mut k = 0;
        while k < self.handing_over.len() {
            let h = self.handing_over[k];
            let both =
                [h.old, h.new].iter().all(|id| self.instances.map.get(id).is_some_and(|i| !i.draining));
            let retire = if !both {
                None
            } else if self.may_drain(h.old)
                && self.shortfall_without(Some(h.old)) <= self.shortfall_without(Some(h.new))
            {
                Some(h.old)
            } else if now.since(h.since) >= timeout || !self.may_drain(h.old) {
                self.counters.handovers_abandoned += 1;
                Some(h.new)
            } else {
                k += 1;
                continue;
            };
            self.handing_over.remove(k);
            if let Some(id) = retire {
                self.drain(id, AfterDrain::Release, actions);
            }
        }
    }

    /// Whether `id` may be taken out of service: never the last serving instance of the largest
    /// runtime (Eq. 7: every request must have somewhere to go).
    fn may_drain(&self, id: InstanceId) -> bool {
        let Some(instance) = self.instances.map.get(&id) else { return false };
        if instance.draining {
            return false;
        }
        let largest = self.largest();
        instance.runtime != largest
            || self.instances.serving().filter(|(_, i)| i.runtime == largest).count() > 1
    }

    fn replacements_in_flight(&self) -> usize {
        let draining = self.draining.values().filter(|a| matches!(a, AfterDrain::Become(_))).count();
        let starting = self.starting.iter().filter(|(_, p)| *p != Purpose::ScaleOut).count();
        draining + starting + self.handing_over.len()
    }

    /// Starts the next replacements of the plan, at most `replace_batch` in flight.
    fn advance_plan(&mut self, actions: &mut Vec<Action>) {
        let slots = self.instances.map.len() + self.starting.len();
        let batch = match self.config.replace_batch {
            0 => ((slots as f64 * self.config.replace_share).ceil() as usize).max(1),
            n => n,
        };
        while self.replacements_in_flight() < batch {
            let Some((id, runtime)) = self.plan.pop_front() else { break };
            if !self.may_drain(id) {
                continue;
            }
            self.counters.replacements += 1;
            if self.config.make_before_break {
                self.launch(runtime, Purpose::Successor(id), actions);
            } else {
                self.drain(id, AfterDrain::Become(runtime), actions);
            }
        }
    }

    /// The Runtime Scheduler's step: a new allocation from the last period's lengths, and the
    /// plan to reach it.
    fn reallocate(&mut self, now: Time) {
        if self.config.runtime_set == RuntimeSet::Optimised && self.counters.allocations == 0 {
            self.optimise_set();
        }
        let counts = self.window.per_runtime(&self.set);
        let g = self.instances.map.len();
        let accounting = match self.config.stable_utilisation {
            Some(utilisation) => Accounting::Stable { utilisation },
            None => Accounting::Paper,
        };
        let mut wanted = target(&self.model, &self.set, &counts, now.since(self.window_start), g, accounting);
        // The robust form keeps DT's layout where fixed shapes would not pay ([`premise`]).
        if self.fixed_would_not_pay() {
            self.counters.fixed_declined += 1;
            wanted = vec![(self.largest(), g)];
        }
        let current: Vec<_> =
            self.instances.serving().map(|(id, i)| (id, i.runtime, i.outstanding())).collect();
        let steps: Plan = plan(&current, &wanted);
        self.plan = steps.into();
        self.window.clear();
        self.window_start = now;
        self.counters.allocations += 1;
    }

    /// Whether the check of [`premise`] is on and says the lengths seen since the last
    /// allocation would cost less on the dynamic runtime, at its measured penalty.
    fn fixed_would_not_pay(&self) -> bool {
        let penalty = self.speed.dynamic_penalty().unwrap_or(1.0);
        let rows = self.config.batch.max(1);
        self.config.dynamic_longest
            && self.config.require_fixed_gain
            && !fixed_shapes_pay(self.model.profile(), &self.window.histogram, &self.set, penalty, rows)
    }

    /// Fixed runtimes serve, enough of their batches are measured, and they do not pay: the
    /// allocation is redone now rather than at the period's end.
    fn fixed_runtimes_disproved(&self) -> bool {
        self.speed.fixed_batches() >= PROBE_BATCHES
            && self.instances.serving().any(|(_, i)| i.runtime.kind == ShapeKind::Fixed)
            && self.fixed_would_not_pay()
    }

    /// Replaces the staircase set by DP bounds over the lengths seen so far (k at the knee).
    fn optimise_set(&mut self) {
        let max_len = self.largest().max_len;
        let batch = self.config.batch.max(1);
        let profile = self.model.profile();
        let cost = |b: u32| profile.latency_ms(PaddedShape { len: b, batch });
        let sets = optimised(
            &self.window.histogram,
            max_len,
            BOUND_GRANULARITY,
            self.config.runtimes as usize,
            &cost,
        );
        let costs: Vec<f64> = sets.iter().map(|(_, c)| *c).collect();
        let k = knee(&costs, KNEE_GAIN);
        let penalty = self.speed.dynamic_penalty().unwrap_or(1.0);
        self.set = shaped(&self.config, &sets[k - 1].0, profile, penalty);
    }

    fn scale(&mut self, now: Time, actions: &mut Vec<Action>) {
        let slots = self.instances.map.len() + self.starting.len();
        match self.scaler.decide(now, slots, self.starting.len()) {
            Some(ScaleDecision::Out) => {
                let runtime = self.largest();
                self.counters.scale_outs += 1;
                self.launch(runtime, Purpose::ScaleOut, actions);
            }
            Some(ScaleDecision::In) => {
                // Make-before-break scales in only while the rest covers the need.
                let keeps_up = |id: InstanceId| {
                    !self.config.make_before_break || self.shortfall_without(Some(id)) == 0.0
                };
                let least_busy = self
                    .instances
                    .serving()
                    .filter(|(id, _)| self.may_drain(*id) && keeps_up(*id))
                    .min_by_key(|(id, i)| (i.outstanding(), *id))
                    .map(|(id, _)| id);
                if let Some(id) = least_busy {
                    self.counters.scale_ins += 1;
                    self.scaler.resized();
                    self.drain(id, AfterDrain::Release, actions);
                }
            }
            None => {}
        }
    }

    fn tick(&mut self, now: Time, actions: &mut Vec<Action>) {
        self.recent.roll();
        self.hand_over(now, actions);
        let settled = self.plan.is_empty()
            && self.draining.is_empty()
            && self.starting.is_empty()
            && self.handing_over.is_empty();
        // The premise check runs only where an allocation could follow it.
        let due = || now >= self.next_allocation || self.fixed_runtimes_disproved();
        if self.config.allocate && settled && due() {
            self.reallocate(now);
            self.next_allocation = now + self.config.period_s.nanos();
        }
        self.scale(now, actions);
        self.advance_plan(actions);
    }

    /// The launch `ticket` ended (up or failed): what it was for.
    fn take_starting(&mut self, ticket: Ticket) -> Option<Purpose> {
        let at = self.starting.iter().position(|(t, _)| *t == ticket)?;
        Some(self.starting.remove(at).1)
    }

    fn instance_up(
        &mut self,
        now: Time,
        info: InstanceInfo,
        launch: Option<Launched>,
        actions: &mut Vec<Action>,
    ) {
        let purpose = launch.and_then(|l| self.take_starting(l.ticket));
        if purpose == Some(Purpose::ScaleOut) {
            self.scaler.resized();
        }
        let runtime = info.unit.runtime;
        self.instances.add(info.id, runtime);
        // Late binding never dispatches through the multi-level queue: its instances stay out.
        if !self.config.late_binding {
            self.queue.add_instance(info.id, runtime.max_len, self.model.capacity(runtime));
        }
        self.run_next(now, info.id, actions);
        if let Some(Purpose::Successor(old)) = purpose {
            self.handing_over.push(HandOver { old, new: info.id, since: now });
            self.hand_over(now, actions);
        }
        self.advance_plan(actions);
    }
}

impl Policy for ArloPolicy {
    fn name(&self) -> &str {
        &self.name
    }

    fn on_event(&mut self, now: Time, event: Event, actions: &mut Vec<Action>) {
        match event {
            Event::InstanceUp { instance, launch } => self.instance_up(now, instance, launch, actions),
            Event::LaunchFailed { ticket, .. } => {
                self.take_starting(ticket);
            }
            Event::Arrival(request) => self.arrival(request, actions),
            Event::BatchDone { instance, .. } => self.batch_done(now, instance, actions),
            Event::Cancelled { request } => self.cancelled(now, request, actions),
            Event::Tick => self.tick(now, actions),
            // Encoder batches run as a unit: only BatchDone frees an instance.
            Event::SequencesDone { .. } => {}
            // Never sent: the live server refuses worker processes for this policy (its
            // instances are threads of the server), and the simulator loses none.
            Event::InstanceLost { .. } => {}
            // Its instances are placed by the driver, wherever there is room.
            Event::SlotsChanged { .. } => {}
        }
    }

    fn queue_len(&self) -> usize {
        self.instances.queued() + self.waiting.queued()
    }

    /// With `dynamic_longest`, every slot on the longest runtime (DT until the first
    /// allocation); otherwise an even split over the runtime set, the remainder (and, with
    /// fewer slots than runtimes, every slot) to the longest runtimes, so the largest always
    /// has one (Eq. 7).
    fn layout(&self, slots: usize) -> Option<Vec<UnitSpec>> {
        if self.config.dynamic_longest {
            return Some(vec![UnitSpec::batch(self.largest()); slots]);
        }
        let k = self.set.len();
        let (each, rest) = (slots / k, slots % k);
        let mut out = Vec::with_capacity(slots);
        for (i, r) in self.set.iter().enumerate() {
            out.extend(std::iter::repeat_n(UnitSpec::batch(*r), each + usize::from(i >= k - rest)));
        }
        Some(out)
    }

    fn tick_interval(&self) -> Option<Nanos> {
        let needs_ticks =
            self.config.allocate || self.config.scaling.rule != super::scaling::ScalingRule::Off;
        needs_ticks.then(|| self.config.tick_s.nanos().max(1))
    }

    fn gauges(&self) -> Vec<Gauge> {
        let mut out: Vec<Gauge> = self
            .counts()
            .into_iter()
            .map(|(r, n)| {
                Gauge::new("instances", "Arlo: instances up, by runtime.", n as f64)
                    .label("runtime", r.to_string())
            })
            .collect();
        out.push(Gauge::new(
            "instances_starting",
            "Arlo: instances launched and not yet up.",
            self.starting.len() as f64,
        ));
        let c = &self.counters;
        for (name, help, v) in [
            ("allocations_total", "Arlo: allocator runs (Alg. 1).", c.allocations),
            (
                "replacements_total",
                "Arlo: instances replaced by one of another runtime (make-before-break).",
                c.replacements,
            ),
            ("scale_outs_total", "Arlo: instances added by its scaling rule.", c.scale_outs),
            ("scale_ins_total", "Arlo: instances removed by its scaling rule.", c.scale_ins),
            ("demoted_total", "Arlo: requests sent to a longer runtime than their ideal one.", c.demoted),
            ("spilled_total", "Arlo: requests run on a fixed runtime's dynamic fallback.", c.spilled),
            ("rejected_total", "Arlo: requests no runtime takes.", c.rejected),
            (
                "handovers_abandoned_total",
                "Arlo: hand-overs that kept the old instance.",
                c.handovers_abandoned,
            ),
            (
                "fixed_declined_total",
                "Arlo: allocations that kept the dynamic layout, fixed shapes costing more.",
                c.fixed_declined,
            ),
        ] {
            out.push(Gauge::new(name, help, v as f64));
        }
        out
    }

    fn describe(&self) -> serde_json::Value {
        let per_runtime: serde_json::Map<String, serde_json::Value> =
            self.counts().into_iter().map(|(r, n)| (r.to_string(), json!(n))).collect();
        json!({
            "policy": self.name,
            "config": self.config,
            "slo_ms": nanos_to_ms(self.model.slo()),
            "runtimes": self.set.iter().map(|r| json!({
                "runtime": r.to_string(),
                "capacity": self.model.capacity(*r),
                "service_ms": self.model.service_ms(*r),
            })).collect::<Vec<_>>(),
            "instances": per_runtime,
            "starting": self.starting.len(),
            "draining": self.draining.len(),
            "handing_over": self.handing_over.len(),
            "dynamic_penalty": self.speed.dynamic_penalty(),
            "counters": self.counters,
        })
    }
}
