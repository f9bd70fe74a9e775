//! Giving up on calls that can no longer be answered in time, around any policy (`--deadline-ms`,
//! a deployment file's `deadline_ms`): a request that has not started by the time the model's
//! recent batches would take it past its arrival plus the deadline is answered with
//! [`DropReason::DeadlineUnreachable`] (HTTP 504), and the policy inside forgets it as if its
//! client had left. Under overload the cores its batch would have taken go to calls that can
//! still be in time, and in an application the calls that would have followed a late answer
//! (a generation after a late rerank) are never made. A request that has started always runs
//! to its end.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

use morph_core::stats::smoothed;
use morph_core::time::nanos_to_ms;
use morph_core::{
    Action, DropReason, Event, Gauge, InitialPlacement, InstanceId, Nanos, Policy, RequestId, Time, UnitSpec,
};

/// Weight of the newest batch in the smoothed batch time.
const SMOOTHING: f64 = 0.3;
/// How often the queue is looked at when nothing else happens (a request's latest start can
/// pass between two events).
const TICK: Nanos = 20_000_000;

/// A policy whose requests are given up once they can no longer start in time.
pub struct GiveUpLate {
    inner: Box<dyn Policy>,
    /// The deadline after a request's arrival.
    within: Nanos,
    /// Requests not yet started, earliest deadline first (those that started or left since
    /// are skipped when they come up).
    deadlines: BinaryHeap<Reverse<(Time, RequestId)>>,
    queued: HashSet<RequestId>,
    /// When each busy instance's batch started.
    started: HashMap<InstanceId, Time>,
    /// A batch's time from its start to its end, smoothed; `None` before the first.
    batch_time: Option<f64>,
    /// When the policy inside is next due a tick.
    inner_tick: Option<Time>,
    given_up: u64,
}

impl std::fmt::Debug for GiveUpLate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GiveUpLate")
            .field("inner", &self.inner.name())
            .field("within", &self.within)
            .field("queued", &self.queued.len())
            .field("given_up", &self.given_up)
            .finish()
    }
}

impl GiveUpLate {
    pub fn new(inner: Box<dyn Policy>, within: Nanos) -> Self {
        Self {
            inner,
            within,
            deadlines: BinaryHeap::new(),
            queued: HashSet::new(),
            started: HashMap::new(),
            batch_time: None,
            inner_tick: None,
            given_up: 0,
        }
    }

    /// What the driver's event tells about batch times and requests that left the queue.
    fn observe(&mut self, now: Time, event: &Event) {
        match event {
            Event::Cancelled { request } => {
                self.queued.remove(request);
            }
            Event::BatchDone { instance, .. } => {
                if let Some(start) = self.started.remove(instance) {
                    let took = now.since(start) as f64;
                    self.batch_time = Some(smoothed(self.batch_time, took, SMOOTHING));
                }
            }
            Event::InstanceLost { instance, .. } => {
                self.started.remove(instance);
            }
            _ => {}
        }
    }

    /// The requests the policy inside started or gave up on leave the queue.
    fn follow(&mut self, now: Time, actions: &[Action]) {
        for action in actions {
            match action {
                Action::Run { instance, requests, .. } => {
                    self.started.insert(*instance, now);
                    requests.iter().for_each(|r| _ = self.queued.remove(r));
                }
                Action::Join { requests, .. } => requests.iter().for_each(|r| _ = self.queued.remove(r)),
                Action::Drop { request, .. } => _ = self.queued.remove(request),
                Action::Launch { .. }
                | Action::Retire { .. }
                | Action::Step { .. }
                | Action::Preload { .. } => {}
            }
        }
    }

    /// Gives up on every queued request that a batch starting now would answer past its deadline.
    fn give_up(&mut self, now: Time, actions: &mut Vec<Action>) {
        let reach = now + self.batch_time.unwrap_or(0.0) as Nanos;
        while let Some(&Reverse((deadline, request))) = self.deadlines.peek() {
            if deadline >= reach {
                break;
            }
            self.deadlines.pop();
            if !self.queued.remove(&request) {
                continue;
            }
            self.given_up += 1;
            actions.push(Action::Drop {
                request,
                reason: DropReason::DeadlineUnreachable { within: self.within },
            });
            let from = actions.len();
            self.inner.on_event(now, Event::Cancelled { request }, actions);
            self.follow(now, &actions[from..]);
        }
    }

    /// Whether a tick goes on to the policy inside: only at its own interval (this one ticks
    /// more often).
    fn inner_ticks(&mut self, now: Time) -> bool {
        let Some(interval) = self.inner.tick_interval() else { return false };
        let due = self.inner_tick.is_none_or(|at| now >= at);
        if due {
            self.inner_tick = Some(now + interval);
        }
        due
    }
}

impl Policy for GiveUpLate {
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// The requests already queued that can no longer be in time are given up before the
    /// policy inside hears of the event (so that an instance freed by it takes none of them),
    /// a new arrival after it (the policy must know a request before it forgets it).
    fn on_event(&mut self, now: Time, event: Event, actions: &mut Vec<Action>) {
        self.observe(now, &event);
        self.give_up(now, actions);
        if let Event::Arrival(info) = &event {
            self.deadlines.push(Reverse((info.arrival + self.within, info.id)));
            self.queued.insert(info.id);
        }
        if event != Event::Tick || self.inner_ticks(now) {
            let from = actions.len();
            self.inner.on_event(now, event, actions);
            self.follow(now, &actions[from..]);
        }
        self.give_up(now, actions);
    }

    fn queue_len(&self) -> usize {
        self.inner.queue_len()
    }

    /// The policy inside's, as of the last event: requests late since then are given up at the
    /// next one (a tick at most [`TICK`] away).
    fn refuses_any(&self) -> Option<DropReason> {
        self.inner.refuses_any()
    }

    fn layout(&self, slots: usize) -> Option<Vec<UnitSpec>> {
        self.inner.layout(slots)
    }

    fn tick_interval(&self) -> Option<Nanos> {
        Some(self.inner.tick_interval().map_or(TICK, |t| t.min(TICK)))
    }

    fn initial_placement(&self) -> InitialPlacement {
        self.inner.initial_placement()
    }

    fn host_cache(&self) -> bool {
        self.inner.host_cache()
    }

    fn gauges(&self) -> Vec<Gauge> {
        let mut gauges = self.inner.gauges();
        gauges.push(Gauge::new(
            "given_up_late_total",
            "Requests given up (504) once their deadline could no longer be met.",
            self.given_up as f64,
        ));
        gauges
    }

    fn describe(&self) -> serde_json::Value {
        let mut described = self.inner.describe();
        if let Some(object) = described.as_object_mut() {
            object.insert("deadline_ms".into(), nanos_to_ms(self.within).into());
        }
        described
    }
}

#[cfg(test)]
mod tests {
    use morph_core::{BatchPlan, HostId, InstanceInfo, RuntimeSpec};

    use super::*;
    use crate::{DynamicBatching, DynamicBatchingConfig};

    const MS: Nanos = 1_000_000;

    /// One instance batching at most 16 padded tokens (one 16-token request a batch), giving up
    /// 100 ms after arrival.
    fn one_at_a_time() -> GiveUpLate {
        let config = DynamicBatchingConfig { max_batch_tokens: 16, ..Default::default() };
        let mut p = GiveUpLate::new(Box::new(DynamicBatching::new(config)), 100 * MS);
        let unit = morph_core::UnitSpec::batch(RuntimeSpec::dynamic(16, 8));
        let instance = InstanceInfo { id: InstanceId(0), unit, host: HostId(0) };
        p.on_event(Time::ZERO, Event::InstanceUp { instance, launch: None }, &mut Vec::new());
        p
    }

    fn event(p: &mut GiveUpLate, ms: u64, event: Event) -> Vec<Action> {
        let mut actions = Vec::new();
        p.on_event(Time(ms * MS), event, &mut actions);
        actions
    }

    fn arrive(p: &mut GiveUpLate, id: u64, ms: u64) -> Vec<Action> {
        event(p, ms, Event::Arrival(morph_core::fixtures::request(id, 16, Time(ms * MS))))
    }

    fn done(p: &mut GiveUpLate, ms: u64, ids: &[u64]) -> Vec<Action> {
        let requests = ids.iter().map(|i| RequestId(*i)).collect();
        event(p, ms, Event::BatchDone { instance: InstanceId(0), requests, failed: false, computed: None })
    }

    fn run(id: u64) -> Action {
        Action::Run { instance: InstanceId(0), requests: vec![RequestId(id)], plan: BatchPlan::FINISH }
    }

    fn dropped(id: u64) -> Action {
        Action::Drop { request: RequestId(id), reason: DropReason::DeadlineUnreachable { within: 100 * MS } }
    }

    #[test]
    fn a_request_that_waited_past_its_deadline_is_given_up_and_a_later_one_is_served() {
        let mut p = one_at_a_time();
        assert_eq!(arrive(&mut p, 0, 0), vec![run(0)]);
        assert!(arrive(&mut p, 1, 10).is_empty());
        assert_eq!(p.queue_len(), 1);
        // Past 110 ms request 1 is past its deadline; the running request 0 is never given up.
        assert!(event(&mut p, 110, Event::Tick).is_empty());
        assert_eq!(event(&mut p, 111, Event::Tick), vec![dropped(1)]);
        assert_eq!(p.queue_len(), 0);
        assert!(done(&mut p, 120, &[0]).is_empty(), "nothing is left to run");
        assert_eq!(arrive(&mut p, 2, 130), vec![run(2)]);
        assert_eq!(p.gauges().last().map(|g| g.value), Some(1.0));
    }

    #[test]
    fn an_instance_freed_takes_none_of_the_requests_it_could_not_answer_in_time() {
        let mut p = one_at_a_time();
        assert_eq!(arrive(&mut p, 0, 0), vec![run(0)]);
        assert!(arrive(&mut p, 1, 30).is_empty() && arrive(&mut p, 2, 60).is_empty());
        // The batch took 80 ms: request 1, due at 130 ms, would end at 160; request 2, due at
        // 160, could end in time and runs.
        assert_eq!(done(&mut p, 80, &[0]), vec![dropped(1), run(2)]);
    }

    #[test]
    fn once_batches_are_timed_a_request_is_given_up_when_a_batch_would_end_past_its_deadline() {
        let mut p = one_at_a_time();
        assert_eq!(arrive(&mut p, 0, 0), vec![run(0)]);
        assert!(arrive(&mut p, 1, 5).is_empty());
        // A batch takes 50 ms: request 1 could still end at 100 ms, within its 105 ms.
        assert_eq!(done(&mut p, 50, &[0]), vec![run(1)]);
        assert!(arrive(&mut p, 2, 55).is_empty());
        // At 106 ms a batch starting now would end at 156 ms, past request 2's 155 ms.
        assert!(event(&mut p, 104, Event::Tick).is_empty());
        assert_eq!(event(&mut p, 106, Event::Tick), vec![dropped(2)]);
        assert!(done(&mut p, 110, &[1]).is_empty(), "nothing is left to run");
    }
}
