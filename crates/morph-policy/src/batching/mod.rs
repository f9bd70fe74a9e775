//! Morph's default policy, dynamic batching: whenever an instance is idle it takes a batch from
//! the queue that fits its runtime (length and rows) and a padded-token budget. With no length
//! buckets the queue is one FIFO and a batch its longest prefix that fits: TEI's batching, the
//! baseline every later policy is compared with. With buckets (Morph's default, bounds and rows
//! from the engine's profile: [`plan`]) a batch holds inputs of one bucket ([`buckets`]), from
//! the bucket whose head waited longest. On a pipelined model every stage has its own queue: a batch of stage
//! k hands its requests to stage k + 1's. Every batch runs under one fixed token plan (0: the
//! plain model). Buckets planned from a profile fitted on a first start can be refined to the
//! batches served ([`refine`]).

use morph_core::{
    Action, BatchPlan, Computed, DropReason, Event, Gauge, InstanceId, InstanceInfo, LatencyProfile,
    PaddedShape, Policy, RequestId, RequestInfo, RuntimeSpec, Then, Time, TokenPlan, UnitSpec,
};
use serde_json::json;

pub mod buckets;
mod idle;
pub mod plan;
mod refine;

use crate::replacer::Replacer;
use buckets::{Bucket, BucketQueue};
use idle::IdleSet;
use refine::Refiner;
pub use refine::RefitSink;

#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DynamicBatchingConfig {
    /// Most padded tokens (rows × padded length) in one batch; one request always fits.
    pub max_batch_tokens: u64,
    /// Most sequences waiting; arrivals beyond it are rejected with `QueueFull`.
    pub max_queue: usize,
    /// The token plan of every batch (the instances must have it compiled).
    pub plan: TokenPlan,
    /// Length buckets, ascending by `max_len`; empty: one FIFO.
    pub buckets: Vec<Bucket>,
    /// Batches served between refits of the buckets to the times they took (0: never); needs
    /// the profile the buckets came from (`morph serve` sets it where that profile was fitted
    /// on the first start).
    pub refine_every: u32,
}

impl Default for DynamicBatchingConfig {
    fn default() -> Self {
        Self {
            max_batch_tokens: 16_384,
            max_queue: 1_024,
            plan: TokenPlan::Plain,
            buckets: Vec::new(),
            refine_every: 0,
        }
    }
}

impl DynamicBatchingConfig {
    /// Refuses buckets that do not ascend or batch no rows.
    pub fn check(&self) -> Result<(), String> {
        if let Some(b) = self.buckets.iter().find(|b| b.max_rows == 0) {
            return Err(format!("bucket of max_len {} has max_rows 0", b.max_len));
        }
        if self.buckets.windows(2).any(|w| w[0].max_len >= w[1].max_len) {
            return Err("buckets must ascend strictly by max_len".into());
        }
        Ok(())
    }
}

/// An instance up, and while it is busy, its batch (kept to hand on to the next stage) and
/// how it started. One record per instance, so that a batch's start and end each touch one
/// place (at tens of thousands of instances, the cache decides the speed).
#[derive(Debug)]
struct InstanceState {
    unit: UnitSpec,
    runtime: RuntimeSpec,
    stage: usize,
    last: bool,
    running: Vec<RequestInfo>,
    started: Option<Started>,
}

/// When a batch started, at which padded shape, and whether every other instance was busy then
/// (marked only where a refit weighs it; false otherwise).
#[derive(Debug, Clone, Copy)]
struct Started {
    at: Time,
    shape: PaddedShape,
    all_busy: bool,
}

#[derive(Debug)]
pub struct DynamicBatching {
    config: DynamicBatchingConfig,
    /// One queue per pipeline stage (one for a whole model).
    queues: Vec<BucketQueue>,
    /// Instances up, by id (ids are dense: an array, not a map, at tens of thousands).
    instances: Vec<Option<InstanceState>>,
    /// Idle instances, the most recently freed taken first ([`IdleSet`]).
    idle: IdleSet,
    /// The instance the next arrival starts on, while nothing waits ([`Policy::next_start`]).
    next_start: Option<InstanceId>,
    /// The idle instances that took a batch in one walk (kept to reuse its allocation).
    taken: Vec<usize>,
    /// Lists of ended batches, handed back by the ledger, for the next batches' lists (one
    /// allocation fewer per batch).
    spare_lists: Vec<Vec<RequestId>>,
    longest_runtime: u32,
    replacer: Replacer,
    refiner: Option<Refiner>,
}

/// Index of an instance in the per-instance arrays.
fn at(id: InstanceId) -> usize {
    id.0 as usize
}

impl DynamicBatching {
    pub fn new(config: DynamicBatchingConfig) -> Self {
        Self {
            queues: vec![BucketQueue::new(&config.buckets)],
            config,
            instances: Vec::new(),
            idle: IdleSet::default(),
            next_start: None,
            taken: Vec::new(),
            spare_lists: Vec::new(),
            replacer: Replacer::default(),
            longest_runtime: 0,
            refiner: None,
        }
    }

    /// Refines the buckets (see [`refine`]) planned from `profile` every `refine_every` batches;
    /// the refits that replan go to `sink` too.
    pub fn refined_from(mut self, profile: &LatencyProfile, sink: Option<RefitSink>) -> Self {
        if self.config.refine_every > 0 {
            self.refiner = Some(Refiner::new(profile, self.config.refine_every, sink));
        }
        self
    }

    fn schedule(&mut self, now: Time, actions: &mut Vec<Action>) {
        self.start_batches(now, actions);
        self.next_start = None;
        if self.queues.iter().all(BucketQueue::is_empty) {
            self.prefetch_next_start();
        }
    }

    /// Starts a batch on every idle instance that finds one in its stage's queue.
    fn start_batches(&mut self, now: Time, actions: &mut Vec<Action>) {
        // Idle instances, the last freed first; those that start a batch leave the set after
        // the walk.
        for k in self.idle.walk() {
            if self.queues.iter().all(BucketQueue::is_empty) {
                break;
            }
            let Some(state) = &mut self.instances[k] else { continue };
            let queue = &mut self.queues[state.stage];
            if queue.is_empty() {
                continue;
            }
            let mut requests = self.spare_lists.pop().unwrap_or_default();
            let longest = queue.take_batch(
                state.runtime,
                self.config.max_batch_tokens,
                &mut state.running,
                &mut requests,
            );
            if requests.is_empty() {
                self.spare_lists.push(requests);
                continue;
            }
            self.taken.push(k);
            let shape = state.runtime.padded_shape(longest, requests.len() as u32);
            state.started = Some(Started { at: now, shape, all_busy: false });
            let then = if state.last { Then::Finish } else { Then::NextStage };
            actions.push(Action::Run {
                instance: InstanceId(k as u32),
                requests,
                plan: BatchPlan { tokens: self.config.plan, then },
            });
        }
        for &k in &self.taken {
            self.idle.remove(k);
        }
        // Only a refit asks whether every instance was busy (not the simulator's hot path).
        if self.refiner.is_some() && self.idle.is_empty() {
            for &k in &self.taken {
                if let Some(started) = self.instances[k].as_mut().and_then(|s| s.started.as_mut()) {
                    started.all_busy = true;
                }
            }
        }
        self.taken.clear();
    }

    /// Asks the cache for the record and the batch list of the instance the next arrival
    /// would start on (the first idle one), while nothing waits.
    fn prefetch_next_start(&mut self) {
        let Some(k) = self.idle.walk().next() else { return };
        self.next_start = Some(InstanceId(k as u32));
        if let Some(state) = &mut self.instances[k] {
            if let Some(slot) = state.running.spare_capacity_mut().first() {
                morph_core::prefetch::prefetch(slot);
            }
            morph_core::prefetch::prefetch(state);
        }
    }

    fn admit(&mut self, request: RequestInfo, actions: &mut Vec<Action>) {
        let max_len = self.longest_runtime;
        let reason = if request.input_len > max_len {
            Some(DropReason::NoRuntimeFits { len: request.input_len, max_len })
        } else {
            self.refuses_any()
        };
        match reason {
            Some(reason) => actions.push(Action::Drop { request: request.id, reason }),
            None => self.queues[0].push_back(request),
        }
    }

    fn instance_up(&mut self, InstanceInfo { id, unit, .. }: InstanceInfo) {
        let (stage, last) = unit.stage.map_or((0, true), |s| (usize::from(s.index), s.is_last()));
        if self.queues.len() <= stage {
            let buckets = &self.config.buckets;
            self.queues.resize_with(stage + 1, || BucketQueue::new(buckets));
        }
        if self.instances.len() <= at(id) {
            self.instances.resize_with(at(id) + 1, || None);
        }
        let runtime = unit.runtime;
        self.instances[at(id)] =
            Some(InstanceState { unit, runtime, stage, last, running: Vec::new(), started: None });
        self.idle.push_last(at(id));
        if stage == 0 {
            self.longest_runtime = self.longest_runtime.max(unit.runtime.longest_taken());
        }
    }

    fn batch_done(&mut self, now: Time, instance: InstanceId, failed: bool, computed: Option<Computed>) {
        let Some(state) = self.instances.get_mut(at(instance)).and_then(Option::as_mut) else { return };
        let all_busy = self.idle.is_empty();
        self.idle.push_first(at(instance));
        let started = state.started.take();
        // The batch's list keeps its allocation for the instance's next batch.
        if !state.last && !failed {
            for request in state.running.drain(..) {
                self.queues[state.stage + 1].push_back(request);
            }
        }
        state.running.clear();
        // Only a whole model's batches that ran to the end time what the profile priced, and
        // only those that ran as the profile measured them: beside every other instance busy
        // (one that ran alone at light load is faster; the profile would learn the load).
        let whole_model = self.queues.len() == 1;
        if let (Some(refiner), Some(started)) = (&mut self.refiner, started)
            && whole_model
            && !failed
            && started.all_busy
            && all_busy
        {
            // The engine's account where it gave one (a packed batch is priced at its rows' mean
            // length), else the clock's at the padded shape.
            let Computed { took, shape } =
                computed.unwrap_or(Computed { took: now.since(started.at), shape: started.shape });
            let ms = morph_core::time::nanos_to_ms(took);
            if let Some(buckets) = refiner.served(shape, ms, &self.config.buckets, self.longest_runtime) {
                let bounds: Vec<(u32, u32)> = buckets.iter().map(|b| (b.max_len, b.max_rows)).collect();
                tracing::info!(refits = refiner.changes, ?bounds, "buckets replanned to the batches served");
                self.rebucket(buckets);
            }
        }
    }

    /// The layout is fixed: a lost instance is replaced by a launch of the same unit. The
    /// requests of its batch that are `retried` go back to the front of their stage's queue.
    fn lost(&mut self, instance: InstanceId, retried: &[RequestId], actions: &mut Vec<Action>) {
        let Some(state) = self.instances.get_mut(at(instance)).and_then(Option::take) else { return };
        self.idle.remove(at(instance));
        for request in state.running.into_iter().rev().filter(|r| retried.contains(&r.id)) {
            self.queues[state.stage].push_front(request);
        }
        self.replacer.replace(state.unit, actions);
    }

    /// Every queue split by `buckets` from now on, its waiting requests in their order.
    fn rebucket(&mut self, buckets: Vec<Bucket>) {
        for queue in &mut self.queues {
            let waiting = queue.drain_by_arrival();
            *queue = BucketQueue::new(&buckets);
            for request in waiting {
                queue.push_back(request);
            }
        }
        self.config.buckets = buckets;
    }

    fn cancelled(&mut self, request: RequestId) {
        for queue in &mut self.queues {
            queue.remove(request);
        }
    }
}

impl Policy for DynamicBatching {
    fn name(&self) -> &str {
        "dynamic-batching"
    }

    fn on_event(&mut self, now: Time, event: Event, actions: &mut Vec<Action>) {
        self.replacer.retry_due(now, actions);
        match event {
            Event::InstanceUp { instance, .. } => self.instance_up(instance),
            Event::Arrival(request) => self.admit(request, actions),
            Event::Cancelled { request } => self.cancelled(request),
            Event::BatchDone { instance, failed, mut requests, computed } => {
                self.batch_done(now, instance, failed, computed);
                requests.clear();
                self.spare_lists.push(requests);
            }
            Event::InstanceLost { instance, retried, .. } => self.lost(instance, &retried, actions),
            Event::LaunchFailed { unit, .. } => self.replacer.launch_failed(now, unit),
            Event::Tick | Event::SlotsChanged { .. } | Event::SequencesDone { .. } => {}
        }
        self.schedule(now, actions);
    }

    fn queue_len(&self) -> usize {
        self.queues.iter().map(BucketQueue::len).sum()
    }

    fn refuses_any(&self) -> Option<DropReason> {
        let capacity = self.config.max_queue;
        (self.queue_len() >= capacity).then_some(DropReason::QueueFull { capacity })
    }

    fn prefetch(&self, instance: InstanceId) {
        if let Some(state) = self.instances.get(at(instance)) {
            morph_core::prefetch::prefetch(state);
        }
    }

    fn next_start(&self) -> Option<InstanceId> {
        self.next_start
    }

    fn gauges(&self) -> Vec<Gauge> {
        if self.queues.len() < 2 {
            return Vec::new();
        }
        let queued = self.queues.iter().enumerate();
        queued
            .map(|(k, q)| {
                Gauge::new("stage_queue", "Requests waiting for a stage, by stage.", q.len() as f64)
                    .label("stage", k.to_string())
            })
            .collect()
    }

    fn describe(&self) -> serde_json::Value {
        json!({
            "name": self.name(),
            "max_batch_tokens": self.config.max_batch_tokens,
            "max_queue": self.config.max_queue,
            "plan": self.config.plan,
            "stages": self.queues.len(),
            "buckets": self.config.buckets,
            "bucket_refits": self.refiner.as_ref().map(|r| r.changes),
        })
    }
}

#[cfg(test)]
mod tests {
    use morph_core::{HostId, Nanos, RequestId};

    use super::*;

    fn policy(max_batch_tokens: u64, max_queue: usize, runtimes: &[RuntimeSpec]) -> DynamicBatching {
        let mut p =
            DynamicBatching::new(DynamicBatchingConfig { max_batch_tokens, max_queue, ..Default::default() });
        for (i, runtime) in runtimes.iter().enumerate() {
            let unit = morph_core::UnitSpec::batch(*runtime);
            let instance = InstanceInfo { id: InstanceId(i as u32), unit, host: HostId(0) };
            p.on_event(Time::ZERO, Event::InstanceUp { instance, launch: None }, &mut Vec::new());
        }
        p
    }

    fn arrive(p: &mut DynamicBatching, id: u64, len: u32) -> Vec<Action> {
        let mut out = Vec::new();
        p.on_event(Time(id), Event::Arrival(morph_core::fixtures::request(id, len, Time(id))), &mut out);
        out
    }

    fn run(instance: u32, ids: &[u64]) -> Action {
        let requests = ids.iter().map(|i| RequestId(*i)).collect();
        Action::Run { instance: InstanceId(instance), requests, plan: BatchPlan::FINISH }
    }

    #[test]
    fn the_next_start_hint_names_the_instance_the_next_arrival_starts_on() {
        let rt = RuntimeSpec::dynamic(512, 1);
        let mut p = policy(1000, 10, &[rt, rt, rt]);
        for id in 1..=3 {
            let named = p.next_start().expect("an idle instance");
            assert_eq!(arrive(&mut p, id, 10), vec![run(named.0, &[id])]);
        }
        assert_eq!(p.next_start(), None, "every instance is busy");
        assert!(arrive(&mut p, 4, 10).is_empty());
        let done =
            |i| Event::BatchDone { instance: InstanceId(i), requests: vec![], failed: false, computed: None };
        let mut out = Vec::new();
        p.on_event(Time(5), done(1), &mut out);
        assert_eq!(out, vec![run(1, &[4])]);
        assert_eq!(p.next_start(), None, "the freed instance took the waiting request");
        p.on_event(Time(6), done(2), &mut Vec::new());
        assert_eq!(p.next_start(), Some(InstanceId(2)));
        assert_eq!(arrive(&mut p, 5, 10), vec![run(2, &[5])]);
    }

    #[test]
    fn the_instance_freed_last_takes_the_next_batch() {
        let rt = RuntimeSpec::dynamic(512, 1);
        let mut p = policy(1000, 10, &[rt, rt, rt, rt]);
        for id in 0..4 {
            assert_eq!(arrive(&mut p, id, 10), vec![run(id as u32, &[id])], "lowest id first at the start");
        }
        let done =
            |i| Event::BatchDone { instance: InstanceId(i), requests: vec![], failed: false, computed: None };
        for (t, i) in [(5, 1), (6, 3), (7, 0)] {
            p.on_event(Time(t), done(i), &mut Vec::new());
        }
        assert_eq!(arrive(&mut p, 10, 10), vec![run(0, &[10])]);
        assert_eq!(arrive(&mut p, 11, 10), vec![run(3, &[11])]);
        assert_eq!(arrive(&mut p, 12, 10), vec![run(1, &[12])]);
    }

    #[test]
    fn idle_instance_runs_the_first_arrival_at_once() {
        let mut p = policy(1000, 10, &[RuntimeSpec::dynamic(512, 8)]);
        assert_eq!(arrive(&mut p, 1, 20), vec![run(0, &[1])]);
        assert_eq!(p.queue_len(), 0);
    }

    #[test]
    fn queued_requests_batch_up_to_the_padded_token_budget() {
        let mut p = policy(100, 10, &[RuntimeSpec::dynamic(512, 8)]);
        arrive(&mut p, 1, 10); // runs alone, instance now busy
        for (id, len) in [(2, 20), (3, 30), (4, 30), (5, 10)] {
            assert!(arrive(&mut p, id, len).is_empty());
        }
        let mut out = Vec::new();
        p.on_event(
            Time(10),
            Event::BatchDone { instance: InstanceId(0), requests: vec![], failed: false, computed: None },
            &mut out,
        );
        // 3 rows padded to 30 = 90 tokens fit 100; a 4th row would be 120.
        assert_eq!(out, vec![run(0, &[2, 3, 4])]);
        assert_eq!(p.queue_len(), 1);
    }

    #[test]
    fn fixed_runtime_is_limited_by_rows_and_length() {
        let mut p = policy(1_000_000, 10, &[RuntimeSpec::fixed(64, 2), RuntimeSpec::fixed(512, 2)]);
        assert_eq!(arrive(&mut p, 1, 100), vec![run(1, &[1])]);
        assert_eq!(arrive(&mut p, 2, 10), vec![run(0, &[2])]);
        assert!(arrive(&mut p, 3, 200).is_empty());
        assert!(arrive(&mut p, 4, 10).is_empty());
        // instance 0 (max_len 64) cannot take the 200-token head, so FIFO waits for instance 1
        let mut out = Vec::new();
        let done =
            |i| Event::BatchDone { instance: InstanceId(i), requests: vec![], failed: false, computed: None };
        p.on_event(Time(5), done(0), &mut out);
        assert!(out.is_empty());
        p.on_event(Time(6), done(1), &mut out);
        assert_eq!(out, vec![run(1, &[3, 4])]);
    }

    #[test]
    fn a_pipeline_hands_each_batch_to_the_next_stage_queue() {
        use morph_core::{ModelId, StageSpec, UnitSpec};
        let mut p =
            DynamicBatching::new(DynamicBatchingConfig { plan: TokenPlan::Merge(1), ..Default::default() });
        for index in 0..2u16 {
            let stage = StageSpec::even(ModelId(0), index, 2, 6);
            let unit = UnitSpec::batch(RuntimeSpec::dynamic(64, 4)).with_stage(stage);
            let instance = InstanceInfo { id: InstanceId(u32::from(index)), unit, host: HostId(0) };
            p.on_event(Time::ZERO, Event::InstanceUp { instance, launch: None }, &mut Vec::new());
        }
        let first = BatchPlan { tokens: TokenPlan::Merge(1), then: Then::NextStage };
        assert_eq!(
            arrive(&mut p, 1, 10),
            vec![Action::Run { instance: InstanceId(0), requests: vec![RequestId(1)], plan: first }]
        );
        assert!(arrive(&mut p, 2, 10).is_empty(), "stage 0 is busy");
        let mut out = Vec::new();
        let done = Event::BatchDone {
            instance: InstanceId(0),
            requests: vec![RequestId(1)],
            failed: false,
            computed: None,
        };
        p.on_event(Time(3), done, &mut out);
        let last = BatchPlan { tokens: TokenPlan::Merge(1), then: Then::Finish };
        assert_eq!(
            out,
            vec![
                Action::Run { instance: InstanceId(0), requests: vec![RequestId(2)], plan: first },
                Action::Run { instance: InstanceId(1), requests: vec![RequestId(1)], plan: last },
            ]
        );
        p.on_event(Time(4), Event::Cancelled { request: RequestId(9) }, &mut Vec::new());
        assert_eq!(p.queue_len(), 0);
    }

    #[test]
    fn a_long_input_never_starves_under_a_stream_of_short_ones() {
        let buckets = vec![Bucket { max_len: 16, max_rows: 4 }, Bucket { max_len: 512, max_rows: 1 }];
        let config = DynamicBatchingConfig { buckets, ..Default::default() };
        let mut p = DynamicBatching::new(config);
        let unit = morph_core::UnitSpec::batch(RuntimeSpec::dynamic(512, 4));
        let instance = InstanceInfo { id: InstanceId(0), unit, host: HostId(0) };
        p.on_event(Time::ZERO, Event::InstanceUp { instance, launch: None }, &mut Vec::new());
        arrive(&mut p, 1, 8); // runs at once; the instance is busy from here on
        for id in 2..=5 {
            arrive(&mut p, id, 8);
        }
        arrive(&mut p, 6, 300);
        // Short inputs keep arriving, four per batch, forever; the long one must still run, and
        // every batch before it must hold a request older than it.
        let (mut next, mut long_ran) = (7, false);
        for _ in 0..10 {
            for _ in 0..4 {
                arrive(&mut p, next, 8);
                next += 1;
            }
            let mut out = Vec::new();
            let done =
                Event::BatchDone { instance: InstanceId(0), requests: vec![], failed: false, computed: None };
            p.on_event(Time(next), done, &mut out);
            let [Action::Run { requests, .. }] = out.as_slice() else { panic!("one batch: {out:?}") };
            if requests.contains(&RequestId(6)) {
                long_ran = true;
                break;
            }
            assert!(
                requests.iter().any(|r| r.0 < 6),
                "a batch of only later arrivals overtook it: {requests:?}"
            );
        }
        assert!(long_ran, "the 300-token request starved");
    }

    #[test]
    fn full_queue_and_oversize_inputs_are_rejected() {
        let mut p = policy(1000, 1, &[RuntimeSpec::dynamic(128, 8)]);
        arrive(&mut p, 1, 10);
        assert!(arrive(&mut p, 2, 10).is_empty());
        assert_eq!(
            arrive(&mut p, 3, 10),
            vec![Action::Drop { request: RequestId(3), reason: DropReason::QueueFull { capacity: 1 } }]
        );
        assert_eq!(
            arrive(&mut p, 4, 129),
            vec![Action::Drop {
                request: RequestId(4),
                reason: DropReason::NoRuntimeFits { len: 129, max_len: 128 }
            }]
        );

        // A fixed shape with a dynamic fallback takes what the fallback takes.
        let mut p = policy(4096, 8, &[RuntimeSpec::fixed(64, 8).with_fallback(512)]);
        assert_eq!(arrive(&mut p, 1, 300), vec![run(0, &[1])]);
        assert_eq!(
            arrive(&mut p, 2, 513),
            vec![Action::Drop {
                request: RequestId(2),
                reason: DropReason::NoRuntimeFits { len: 513, max_len: 512 }
            }]
        );
    }

    #[test]
    fn a_lost_instance_is_replaced_and_a_failed_replacement_is_tried_again_a_second_later() {
        let runtime = RuntimeSpec::dynamic(64, 4);
        let mut p = policy(4096, 16, &[runtime, runtime]);
        let mut out = Vec::new();
        let lost = Event::InstanceLost { instance: InstanceId(1), retried: Vec::new(), failed: Vec::new() };
        p.on_event(Time(5), lost, &mut out);
        let [Action::Launch { ticket, unit, host: None }] = out.as_slice() else { panic!("{out:?}") };
        assert_eq!(unit.runtime, runtime);
        let failed = Event::LaunchFailed { ticket: *ticket, unit: *unit, reason: "host gone".into() };
        out.clear();
        let second = morph_core::time::ms_to_nanos(crate::replacer::RELAUNCH_AFTER_MS);
        p.on_event(Time(6), failed, &mut out);
        assert!(out.is_empty(), "not at once");
        let cancelled = |r| Event::Cancelled { request: RequestId(r) };
        p.on_event(Time(6 + second - 1), cancelled(90), &mut out);
        assert!(out.is_empty(), "not within a second");
        p.on_event(Time(6 + second), cancelled(91), &mut out);
        let again =
            matches!(out.as_slice(), [Action::Launch { unit: u, host: None, .. }] if u.runtime == runtime);
        assert!(again, "{out:?}");
        out.clear();
        p.on_event(Time(6 + 3 * second), cancelled(92), &mut out);
        assert!(out.is_empty(), "tried once per failure");
    }

    #[test]
    fn buckets_refined_to_the_times_served_keep_every_waiting_request_in_its_order() {
        // Planned from a profile where a call costs 0.5 ms; the batches served take 20 ms a call.
        let prior = morph_core::fixtures::linear_profile(0.5, 0.25);
        let buckets = plan::length_plan(&prior, 512).buckets;
        let config = DynamicBatchingConfig {
            buckets: buckets.clone(),
            refine_every: 3,
            max_batch_tokens: 1 << 20,
            ..Default::default()
        };
        let mut p = DynamicBatching::new(config).refined_from(&prior, None);
        let unit = morph_core::UnitSpec::batch(RuntimeSpec::dynamic(512, 16));
        let instance = InstanceInfo { id: InstanceId(0), unit, host: HostId(0) };
        p.on_event(Time::ZERO, Event::InstanceUp { instance, launch: None }, &mut Vec::new());

        let mut now = Time::ZERO;
        let mut lens = std::collections::HashMap::new();
        let mut served = Vec::new();
        let mut waiting_at_a_refit = 0;
        let mut out = Vec::new();
        for round in 0..64 {
            // Four arrivals of mixed lengths, then batches until none is left, each ending after
            // 20 ms a call and 0.25 ms a padded token.
            for (k, len) in [12, 40, 64, 300].into_iter().enumerate() {
                now = Time(now.0 + 1);
                let id = round * 4 + k as u64;
                lens.insert(id, len);
                p.on_event(now, Event::Arrival(morph_core::fixtures::request(id, len, now)), &mut out);
            }
            while let Some(action) = out.pop() {
                let Action::Run { requests, .. } = action else { panic!("{action:?}") };
                let longest = requests.iter().map(|r| lens[&r.0]).max().unwrap_or(1);
                let tokens = f64::from(longest) * requests.len() as f64;
                now = Time(now.0 + morph_core::time::ms_to_nanos(20.0 + 0.25 * tokens));
                served.extend(requests.iter().map(|r| r.0));
                let (refits, waiting) = (p.describe()["bucket_refits"].clone(), p.queue_len());
                p.on_event(
                    now,
                    Event::BatchDone { instance: InstanceId(0), requests, failed: false, computed: None },
                    &mut out,
                );
                if p.describe()["bucket_refits"] != refits {
                    waiting_at_a_refit = waiting_at_a_refit.max(waiting);
                }
            }
        }
        assert!(p.describe()["bucket_refits"].as_u64() >= Some(1), "{}", p.describe());
        assert_ne!(p.config.buckets, buckets, "replanned to the times served");
        assert!(waiting_at_a_refit > 0, "requests were waiting when the buckets changed");
        // Every request is served once, the ones waiting at a refit included.
        assert_eq!(p.queue_len(), 0);
        served.sort_unstable();
        assert_eq!(served, (0..64 * 4).collect::<Vec<_>>());
    }

    /// Traffic the refits below weigh: inputs of `lens` tokens in turn, on two instances, whose
    /// batches take 20 ms a call by the clock and 0.25 ms a real token (the engine removes the
    /// padding). `at_once`: they arrive together (both instances busy until the queue empties),
    /// else one at a time, each served before the next arrives (one instance busy, one idle).
    struct Served {
        at_once: bool,
        lens: &'static [u32],
    }

    /// Bucket refits of a policy planned from `prior` into `buckets` serving `served`, each batch
    /// reported by the engine as `computed` gives from its clock time and its inputs' lengths.
    fn refits(
        prior: &LatencyProfile,
        buckets: Vec<Bucket>,
        served: Served,
        computed: impl Fn(Nanos, &[u32]) -> Option<Computed>,
    ) -> u64 {
        let config = DynamicBatchingConfig {
            buckets,
            refine_every: 8,
            max_batch_tokens: 1 << 20,
            ..Default::default()
        };
        let mut p = DynamicBatching::new(config).refined_from(prior, None);
        let unit = morph_core::UnitSpec::batch(RuntimeSpec::dynamic(512, 16));
        for id in [0, 1] {
            let instance = InstanceInfo { id: InstanceId(id), unit, host: HostId(0) };
            p.on_event(Time::ZERO, Event::InstanceUp { instance, launch: None }, &mut Vec::new());
        }
        let len_of = |id: u64| served.lens[id as usize % served.lens.len()];
        let (mut now, mut out, mut running) = (Time::ZERO, Vec::new(), Vec::new());
        let arrive = |p: &mut DynamicBatching, id: u64, now: Time, out: &mut Vec<Action>| {
            p.on_event(now, Event::Arrival(morph_core::fixtures::request(id, len_of(id), now)), out)
        };
        let requests = 400;
        if served.at_once {
            (0..requests).for_each(|id| arrive(&mut p, id, now, &mut out));
        }
        for id in 0..requests {
            if !served.at_once {
                arrive(&mut p, id, now, &mut out);
            }
            // Runs started end in the order they end, each freeing its instance for the next.
            loop {
                for action in out.drain(..) {
                    let Action::Run { instance, requests, .. } = action else { panic!("{action:?}") };
                    let lens: Vec<u32> = requests.iter().map(|r| len_of(r.0)).collect();
                    let tokens: u32 = lens.iter().sum();
                    let took = morph_core::time::ms_to_nanos(20.0 + 0.25 * f64::from(tokens));
                    running.push((Time(now.0 + took), computed(took, &lens), instance, requests));
                }
                running.sort_by_key(|r| std::cmp::Reverse(r.0));
                let Some((end, computed, instance, requests)) = running.pop() else { break };
                now = end;
                p.on_event(now, Event::BatchDone { instance, requests, failed: false, computed }, &mut out);
            }
        }
        p.describe()["bucket_refits"].as_u64().unwrap()
    }

    #[test]
    fn buckets_are_refined_only_by_batches_timed_as_the_profile_was_beside_every_instance_busy() {
        // Profiled at 0.5 ms a call; served at 20 ms a call by the clock.
        let prior = morph_core::fixtures::linear_profile(0.5, 0.25);
        let planned = || plan::length_plan(&prior, 512).buckets;
        let forties = |at_once| Served { at_once, lens: &[40] };
        let by_the_clock = |_: Nanos, _: &[u32]| None;
        assert!(refits(&prior, planned(), forties(true), by_the_clock) > 0, "40x the cost a call, both busy");
        assert_eq!(refits(&prior, planned(), forties(false), by_the_clock), 0, "one beside an idle instance");
        // The engine says each computed as profiled: its clock time was the host's, not the batch's.
        let as_profiled = |took: Nanos, lens: &[u32]| {
            let shape = PaddedShape { len: 40, batch: lens.len() as u32 };
            Some(Computed { took: took - morph_core::time::ms_to_nanos(19.5), shape })
        };
        assert_eq!(refits(&prior, planned(), forties(true), as_profiled), 0, "the engine's time is weighed");
    }

    #[test]
    fn a_packed_batch_of_short_and_long_inputs_is_weighed_at_the_shape_the_engine_computed() {
        // Profiled as served: 20 ms a call and 0.25 ms a token, on rows of one length each.
        let prior = morph_core::fixtures::linear_profile(20.0, 0.25);
        let one_bucket = || vec![Bucket { max_len: 512, max_rows: 16 }];
        let mixed = || Served { at_once: true, lens: &[10, 40] };
        // Padded to the longest (40), a batch looks 37% cheaper a row than it is.
        let by_the_clock = |_: Nanos, _: &[u32]| None;
        assert!(refits(&prior, one_bucket(), mixed(), by_the_clock) > 0, "padded shapes: a false refit");
        let packed = |took: Nanos, lens: &[u32]| {
            let lens: Vec<usize> = lens.iter().map(|&l| l as usize).collect();
            Some(Computed { took, shape: RuntimeSpec::dynamic(512, 16).priced_shape(&lens, true) })
        };
        assert_eq!(refits(&prior, one_bucket(), mixed(), packed), 0, "at the rows' mean length: as profiled");
    }
}
