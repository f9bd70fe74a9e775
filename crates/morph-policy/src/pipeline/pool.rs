//! The executor of every pipeline policy: per-stage FIFO queues served by idle replicas (a
//! shared queue per stage is the c-server queue QUART's M/M/c model assumes, and no worse than
//! joining the replica with the fewest outstanding requests), hand-off between stages, and the
//! sizer's counts carried out with launches, warm re-threading and retirements.

use std::collections::{BTreeMap, HashMap, VecDeque};

use morph_core::time::{Millis, nanos_to_secs};
use morph_core::{
    Action, BatchPlan, DropReason, Event, Gauge, HostId, HostSlots, InitialPlacement, InstanceId,
    InstanceInfo, Nanos, Policy, RequestId, StageTime, StageTimes, Ticket, Tickets, Time, UnitSpec,
};

use super::placement::{ClusterView, PlacementRule};
use super::share::share_slots;
use super::stats::StageStats;
use super::warm_match::{Wanted, match_warm};
use super::{PoolConfig, PoolView, Sizer, StageTarget, StageView};

#[derive(Debug)]
struct Replica {
    threads: u16,
    host: HostId,
    key: bool,
    /// The batch it runs: each request with the time it reached the stage.
    running: Vec<(RequestId, Time)>,
}

#[derive(Debug)]
struct Starting {
    threads: u16,
    host: HostId,
    key: bool,
}

#[derive(Debug)]
struct Stage {
    queue: VecDeque<(RequestId, Time)>,
    replicas: BTreeMap<InstanceId, Replica>,
    starting: BTreeMap<Ticket, Starting>,
    target: StageTarget,
    /// Targets of the last `scale_down_delay`, for stabilised scale-down.
    asked: VecDeque<(Time, u32)>,
    stats: StageStats,
    time: StageTime,
    hop_s: f64,
}

impl Stage {
    /// Replicas up and starting at the target's thread count.
    fn fresh(&self) -> (u32, u32) {
        let t = self.target.threads;
        let up = self.replicas.values().filter(|r| r.threads == t).count() as u32;
        let starting = self.starting.values().filter(|s| s.threads == t).count() as u32;
        (up, starting)
    }

    /// Replicas up and starting, at any thread count.
    fn held(&self) -> (u32, u32) {
        (self.replicas.len() as u32, self.starting.len() as u32)
    }

    /// Replicas it lacks to reach its target, counting those starting.
    fn short(&self) -> u32 {
        let (up, starting) = self.held();
        self.target.replicas.saturating_sub(up + starting)
    }

    /// The most replicas asked for over the stabilisation window.
    fn keep(&self) -> u32 {
        self.asked.iter().map(|a| a.1).max().unwrap_or(self.target.replicas).max(1)
    }
}

/// What a stage's launches are for ([`PipelinePolicy::grow`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Growth {
    /// Replicas up to its target.
    ToTarget,
    /// One replica at the target's threads to replace one at another count.
    Rethread,
}

/// A pipeline policy: the shared executor driven by a [`Sizer`].
#[derive(Debug)]
pub struct PipelinePolicy<S> {
    name: String,
    config: PoolConfig,
    profile: StageTimes,
    slo_s: f64,
    sizer: S,
    stages: Vec<Stage>,
    cluster: ClusterView,
    tickets: Tickets,
    /// The stage queue each waiting request is in.
    waiting: HashMap<RequestId, u16>,
    next_control: Time,
    /// Replicas the last targets asked for beyond the cluster's slots.
    slots_short: u32,
    /// Whether the shortfall has been logged.
    reported_short: bool,
    /// Stages asked to be loaded into hosts' memory ([`PoolConfig::preload`]).
    preloads: u64,
}

impl<S: Sizer> PipelinePolicy<S> {
    pub fn new(
        name: &str,
        config: PoolConfig,
        profile: StageTimes,
        hosts: &HostSlots,
        slo: Nanos,
        sizer: S,
    ) -> Self {
        let stage_times: Vec<(StageTime, f64)> = if config.whole_model {
            let a_ms = profile.stages.iter().map(|t| t.a_ms).sum();
            let b_ms = profile.stages.iter().map(|t| t.b_ms).sum();
            vec![(StageTime { a_ms, b_ms }, 0.0)]
        } else {
            let hop = |i: usize| if i > 0 { Millis(profile.hop_ms).secs() } else { 0.0 };
            profile.stages.iter().enumerate().map(|(i, t)| (*t, hop(i))).collect()
        };
        let target =
            StageTarget { replicas: config.initial_replicas.max(1), threads: config.threads, key: false };
        let stats = || StageStats::new(config.window_s.nanos(), config.history_s.nanos(), config.cv_window);
        let stages = stage_times
            .into_iter()
            .map(|(time, hop_s)| Stage {
                queue: VecDeque::new(),
                replicas: BTreeMap::new(),
                starting: BTreeMap::new(),
                target,
                asked: VecDeque::new(),
                stats: stats(),
                time,
                hop_s,
            })
            .collect();
        Self {
            name: name.to_string(),
            cluster: ClusterView::new(hosts),
            slo_s: nanos_to_secs(slo),
            config,
            profile,
            sizer,
            stages,
            tickets: Tickets::default(),
            waiting: HashMap::new(),
            next_control: Time::ZERO,
            slots_short: 0,
            reported_short: false,
            preloads: 0,
        }
    }

    fn unit(&self, stage: u16, threads: u16) -> UnitSpec {
        if self.config.whole_model {
            self.profile.whole_unit(threads)
        } else {
            self.profile.stage_unit(stage, threads)
        }
    }

    fn last_stage(&self) -> u16 {
        self.stages.len() as u16 - 1
    }

    fn stage_of(&self, instance: InstanceId) -> Option<u16> {
        self.stages.iter().position(|s| s.replicas.contains_key(&instance)).map(|i| i as u16)
    }

    /// Runs waiting requests of `stage` on its idle replicas.
    fn dispatch(&mut self, stage: u16, actions: &mut Vec<Action>) {
        let rows = self.config.max_batch.clamp(1, self.profile.runtime.max_batch) as usize;
        let plan = if stage < self.last_stage() { BatchPlan::next_stage() } else { BatchPlan::FINISH };
        let s = &mut self.stages[usize::from(stage)];
        for (&id, replica) in s.replicas.iter_mut().filter(|(_, r)| r.running.is_empty()) {
            if s.queue.is_empty() {
                break;
            }
            let take = rows.min(s.queue.len());
            replica.running = s.queue.drain(..take).collect();
            let requests: Vec<RequestId> = replica.running.iter().map(|r| r.0).collect();
            for r in &requests {
                self.waiting.remove(r);
            }
            actions.push(Action::Run { instance: id, requests, plan });
        }
    }

    fn enqueue(&mut self, now: Time, stage: u16, request: RequestId) {
        let s = &mut self.stages[usize::from(stage)];
        s.queue.push_back((request, now));
        s.stats.arrive(now);
        self.waiting.insert(request, stage);
    }

    /// Launches replicas (at the target's threads) of `stage` while slots are free: up to its
    /// target, counting those at other thread counts, for [`Growth::ToTarget`]; one more for
    /// [`Growth::Rethread`] when its target changed its threads (a replica at the new count is
    /// launched while none is starting, and the stale ones retire first), so a thread change
    /// never takes capacity away in a burst. `warm` are hosts matched for its warm starts
    /// ([`match_warm`]), taken first.
    fn grow(&mut self, stage: u16, growth: Growth, warm: Vec<HostId>, actions: &mut Vec<Action>) {
        let i = usize::from(stage);
        let s = &self.stages[i];
        let target = s.target;
        let (up, starting) = s.held();
        let held = up + starting;
        let (fresh_up, fresh_starting) = s.fresh();
        let stale = held - fresh_up - fresh_starting;
        let launches = match growth {
            Growth::ToTarget => target.replicas.saturating_sub(held),
            Growth::Rethread => u32::from(stale > 0 && fresh_starting == 0 && held <= target.replicas),
        };
        let mut warm = warm.into_iter();
        for _ in 0..launches {
            let matched = warm.by_ref().find(|&h| self.cluster.fits_on(h, target.threads));
            let placed = matched.or_else(|| {
                self.cluster.place(
                    self.config.placement,
                    stage,
                    target.key,
                    self.config.reserve,
                    target.threads,
                )
            });
            let Some(host) = placed else {
                break;
            };
            self.launch(stage, host, actions);
        }
    }

    /// Starts a replica of `stage` at its target's threads on `host`.
    fn launch(&mut self, stage: u16, host: HostId, actions: &mut Vec<Action>) {
        let target = self.stages[usize::from(stage)].target;
        self.cluster.hold(host, stage, target.key, target.threads);
        let ticket = self.tickets.issue();
        let unit = self.unit(stage, target.threads);
        let start = Starting { threads: target.threads, host, key: target.key };
        self.stages[usize::from(stage)].starting.insert(ticket, start);
        actions.push(Action::Launch { ticket, unit, host: Some(host) });
    }

    /// Retires idle replicas of `stage`, those at other thread counts first (down to its target),
    /// while the ones left up still meet its stabilised target (its target alone when
    /// `pressed`: another stage waits for a slot). Returns whether any was retired.
    fn shrink(&mut self, stage: u16, pressed: bool, actions: &mut Vec<Action>) -> bool {
        let i = usize::from(stage);
        let target = self.stages[i].target;
        let keep = if pressed { target.replicas.max(1) } else { self.stages[i].keep() };
        let mut retired = false;
        loop {
            let s = &self.stages[i];
            let held = s.replicas.len() as u32;
            let idle = |r: &&Replica| r.running.is_empty();
            // Replicas at another thread count go down to the target itself (a re-threading
            // replaces them); the rest only to the stabilised count.
            let stale = s.replicas.iter().find(|(_, r)| idle(r) && r.threads != target.threads);
            let pick = match stale {
                Some(found) if held > target.replicas.max(1) => Some(found),
                _ if held > keep => stale.or_else(|| s.replicas.iter().rev().find(|(_, r)| idle(r))),
                _ => None,
            };
            let Some((&id, _)) = pick else {
                break;
            };
            let replica = self.stages[i].replicas.remove(&id).expect("just found");
            self.cluster.release(replica.host, replica.key, replica.threads);
            actions.push(Action::Retire { instance: id });
            retired = true;
        }
        retired
    }

    /// Brings every stage towards its target: retirements first, so the slots they free go to
    /// the stages still short (stabilisation is waived while some stage waits for a slot).
    fn rebalance(&mut self, actions: &mut Vec<Action>) {
        let short: usize = self.stages.iter().map(|s| s.short() as usize).sum();
        let pressed = short > self.cluster.free_slots();
        for stage in 0..self.stages.len() as u16 {
            self.shrink(stage, pressed, actions);
        }
        // The stages furthest below their targets take the free slots first; a re-threading
        // replica only takes a slot no stage below its target asks for.
        let mut order: Vec<u16> = (0..self.stages.len() as u16).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(self.stages[usize::from(i)].short()));
        let mut warm = self.warm_starts(&order).into_iter();
        for &stage in &order {
            self.grow(stage, Growth::ToTarget, warm.next().unwrap_or_default(), actions);
        }
        for &stage in &order {
            self.grow(stage, Growth::Rethread, Vec::new(), actions);
        }
    }

    /// With the host cache and cache-aware placement, the hosts where the launches up to the
    /// targets start warm, for the stages in `order`, matched together (QUART §6.2).
    fn warm_starts(&self, order: &[u16]) -> Vec<Vec<HostId>> {
        let cache_aware = self.config.host_cache && self.config.placement == PlacementRule::CacheAware;
        if !cache_aware || self.stages.iter().all(|s| s.short() == 0) {
            return Vec::new();
        }
        let wants: Vec<Wanted> = order
            .iter()
            .map(|&stage| {
                let s = &self.stages[usize::from(stage)];
                Wanted { stage, launches: s.short(), threads: s.target.threads, key: s.target.key }
            })
            .collect();
        match_warm(&self.cluster, &wants)
    }

    /// Targets that ask for more replicas than the cluster has slots are cut to shares by need
    /// (never starving a stage behind the others), and the shortfall is reported: a gauge, and a
    /// log line the first time.
    fn share_scarce_slots(&mut self, targets: &mut [StageTarget]) {
        let wants: Vec<u32> = targets.iter().map(|t| t.replicas.max(1)).collect();
        let slots = self.cluster.total_slots() as u32;
        self.slots_short = wants.iter().sum::<u32>().saturating_sub(slots);
        if self.slots_short > 0 && !self.reported_short {
            self.reported_short = true;
            tracing::info!(
                policy = %self.name,
                asked = ?wants,
                slots,
                "the stages ask for {} replicas more than the cluster's slots; sharing the slots by need (gauge pipeline_slots_short)",
                self.slots_short
            );
        }
        for (target, shared) in targets.iter_mut().zip(share_slots(&wants, slots, 1)) {
            target.replicas = shared;
        }
    }

    fn control(&mut self, now: Time, actions: &mut Vec<Action>) {
        let view = PoolView {
            now,
            stages: self
                .stages
                .iter()
                .map(|s| {
                    let (up, starting) = s.held();
                    StageView {
                        stats: &s.stats,
                        up,
                        starting,
                        threads: s.target.threads,
                        queued: s.queue.len(),
                        time: s.time,
                        hop_s: s.hop_s,
                    }
                })
                .collect(),
            slots: self.cluster.total_slots(),
            cores: self.cluster.total_cores(),
            slo_s: self.slo_s,
        };
        let mut targets = self.sizer.size(&view);
        self.share_scarce_slots(&mut targets);
        let delay = self.config.scale_down_delay_s.nanos();
        for (i, target) in targets.into_iter().enumerate().take(self.stages.len()) {
            let s = &mut self.stages[i];
            s.target = StageTarget { replicas: target.replicas.max(1), ..target };
            s.asked.push_back((now, s.target.replicas));
            while s.asked.front().is_some_and(|a| now.since(a.0) > delay) {
                s.asked.pop_front();
            }
        }
        self.rebalance(actions);
        self.preload(actions);
        for stage in 0..self.stages.len() as u16 {
            self.dispatch(stage, actions);
        }
    }

    /// [`PoolConfig::preload`]: the stages every host has not loaded yet (all of them at the
    /// first period, a joining host's later), loaded one after another by the driver.
    fn preload(&mut self, actions: &mut Vec<Action>) {
        if !self.config.preload || !self.config.host_cache {
            return;
        }
        for (host, stage) in self.cluster.preload_all(self.stages.len() as u16) {
            self.preloads += 1;
            actions.push(Action::Preload { unit: self.unit(stage, self.config.threads), host });
        }
    }

    fn instance_up(&mut self, info: InstanceInfo, launched: Option<Ticket>, actions: &mut Vec<Action>) {
        let stage = if self.config.whole_model { 0 } else { info.unit.stage_index() };
        let Some(s) = self.stages.get_mut(usize::from(stage)) else { return };
        let threads = info.unit.threads.unwrap_or(1);
        let key = match launched.and_then(|t| s.starting.remove(&t)) {
            Some(start) => start.key,
            None => {
                self.cluster.hold(info.host, stage, false, threads);
                false
            }
        };
        s.replicas.insert(info.id, Replica { threads, host: info.host, key, running: Vec::new() });
        // The initial layout comes up one replica at a time: launching for a stage whose first
        // replica is about to register would start a replica nobody asked for.
        let laying_out = launched.is_none() && self.stages.iter().any(|s| s.replicas.is_empty());
        if !laying_out {
            self.rebalance(actions);
        }
        self.dispatch(stage, actions);
    }

    fn batch_done(&mut self, now: Time, instance: InstanceId, failed: bool, actions: &mut Vec<Action>) {
        let Some(stage) = self.stage_of(instance) else { return };
        let s = &mut self.stages[usize::from(stage)];
        let ran = s.replicas.get_mut(&instance).map(|r| std::mem::take(&mut r.running)).unwrap_or_default();
        for &(_, since) in &ran {
            s.stats.finished(now, now.since(since));
        }
        if !failed && stage < self.last_stage() {
            for (request, _) in ran {
                self.enqueue(now, stage + 1, request);
            }
            self.dispatch(stage + 1, actions);
        }
        self.rebalance(actions);
        self.dispatch(stage, actions);
    }
}

impl<S: Sizer> PipelinePolicy<S> {
    /// A replica's worker is gone: it leaves its stage and its slot (the next control period
    /// launches the stage back to its target); the requests of its batch that are `retried`
    /// go back to the front of the stage's queue, the others were answered by the ledger.
    fn lost(&mut self, now: Time, instance: InstanceId, retried: &[RequestId], actions: &mut Vec<Action>) {
        let Some(stage) = self.stage_of(instance) else { return };
        let s = &mut self.stages[usize::from(stage)];
        if let Some(replica) = s.replicas.remove(&instance) {
            for &(request, since) in replica.running.iter().rev() {
                if retried.contains(&request) {
                    s.queue.push_front((request, since));
                    self.waiting.insert(request, stage);
                } else {
                    s.stats.finished(now, now.since(since));
                }
            }
            self.cluster.release(replica.host, replica.key, replica.threads);
        }
        self.dispatch(stage, actions);
    }
}

impl<S: Sizer> Policy for PipelinePolicy<S> {
    fn name(&self) -> &str {
        &self.name
    }

    fn on_event(&mut self, now: Time, event: Event, actions: &mut Vec<Action>) {
        match event {
            Event::InstanceUp { instance, launch } => {
                self.instance_up(instance, launch.map(|l| l.ticket), actions)
            }
            Event::LaunchFailed { ticket, .. } => {
                for s in &mut self.stages {
                    if let Some(start) = s.starting.remove(&ticket) {
                        self.cluster.release(start.host, start.key, start.threads);
                    }
                }
            }
            Event::Arrival(r) => {
                let max_len = self.profile.runtime.longest_taken();
                if r.input_len > max_len {
                    actions.push(Action::Drop {
                        request: r.id,
                        reason: DropReason::NoRuntimeFits { len: r.input_len, max_len },
                    });
                } else if self.waiting.len() >= self.config.max_queue {
                    let capacity = self.config.max_queue;
                    actions.push(Action::Drop { request: r.id, reason: DropReason::QueueFull { capacity } });
                } else {
                    self.enqueue(now, 0, r.id);
                    self.dispatch(0, actions);
                }
            }
            Event::BatchDone { instance, failed, .. } => self.batch_done(now, instance, failed, actions),
            Event::InstanceLost { instance, retried, .. } => self.lost(now, instance, &retried, actions),
            Event::Cancelled { request } => {
                if let Some(stage) = self.waiting.remove(&request) {
                    self.stages[usize::from(stage)].queue.retain(|q| q.0 != request);
                }
            }
            Event::Tick => {
                if now >= self.next_control {
                    self.next_control = now + self.config.period_s.nanos();
                    self.control(now, actions);
                }
            }
            Event::SlotsChanged { host, slots } => self.cluster.set_slots(host, slots),
            Event::SequencesDone { .. } => {}
        }
    }

    fn queue_len(&self) -> usize {
        self.waiting.len()
    }

    fn layout(&self, _slots: usize) -> Option<Vec<UnitSpec>> {
        let initial = self.config.initial_replicas.max(1) as usize;
        let units = (0..self.stages.len() as u16)
            .flat_map(|s| std::iter::repeat_n(self.unit(s, self.config.threads), initial));
        Some(units.collect())
    }

    fn tick_interval(&self) -> Option<Nanos> {
        Some(self.config.period_s.nanos())
    }

    /// The dispersing rules spread the first replicas too, so each stage has room for warm
    /// starts beside its cached parameters from t = 0; first-fit packs them.
    fn initial_placement(&self) -> InitialPlacement {
        match self.config.placement {
            PlacementRule::FirstFit => InitialPlacement::Packed,
            PlacementRule::CacheAware | PlacementRule::KlRandom => InitialPlacement::Spread,
        }
    }

    fn host_cache(&self) -> bool {
        self.config.host_cache
    }

    fn gauges(&self) -> Vec<Gauge> {
        let mut out = self.sizer.gauges();
        out.push(Gauge::new(
            "pipeline_slots_short",
            "Pipeline: slots the stages' targets want beyond those the host has.",
            f64::from(self.slots_short),
        ));
        out.push(Gauge::new(
            "pipeline_preloads_total",
            "Pipeline: replicas started from the host-memory cache.",
            self.preloads as f64,
        ));
        for (i, s) in self.stages.iter().enumerate() {
            let stage = i.to_string();
            let g = |name: &str, help: &'static str, value: f64| {
                Gauge::new(name, help, value).label("stage", stage.clone())
            };
            out.push(g("stage_replicas", "Pipeline: replicas up, by stage.", s.replicas.len() as f64));
            out.push(g("stage_starting", "Pipeline: replicas starting, by stage.", s.starting.len() as f64));
            let target = f64::from(s.target.replicas);
            out.push(g(
                "stage_target_replicas",
                "Pipeline: replicas the controller wants, by stage.",
                target,
            ));
            out.push(g(
                "stage_threads",
                "Pipeline: threads per replica, by stage.",
                f64::from(s.target.threads),
            ));
            out.push(g(
                "stage_key",
                "Pipeline: 1 for the stage the controller sizes first.",
                f64::from(u8::from(s.target.key)),
            ));
            out.push(g("stage_queue", "Requests waiting for a stage, by stage.", s.queue.len() as f64));
            let busy = s.replicas.values().filter(|r| !r.running.is_empty()).count() as f64;
            out.push(g("stage_busy", "Pipeline: replicas running a batch, by stage.", busy));
            let arrivals = s.stats.total_arrivals() as f64;
            out.push(g("stage_arrivals_total", "Pipeline: requests that reached the stage.", arrivals));
            if let Some((cv, _)) = s.stats.cv() {
                out.push(g(
                    "stage_cv",
                    "Pipeline: the coefficient of variation of the stage's inter-arrival gaps.",
                    cv,
                ));
            }
            if let Some(d) = s.stats.observed_delay() {
                out.push(g(
                    "stage_observed_delay_seconds",
                    "Pipeline: the stage's observed queueing delay.",
                    d,
                ));
            }
        }
        out
    }

    fn describe(&self) -> serde_json::Value {
        // QUART's s(C) per stage, and what it gives on 1, 2 and 4 threads (Fig. 3b).
        let times: Vec<serde_json::Value> = self
            .profile
            .stages
            .iter()
            .map(|t| serde_json::json!({"a_ms": t.a_ms, "b_ms": t.b_ms, "ms_by_threads": [t.ms(1), t.ms(2), t.ms(4)]}))
            .collect();
        serde_json::json!({
            "policy": self.name,
            "stages": self.stages.len(),
            "stage_times": times,
            "hop_ms": self.profile.hop_ms,
            "pool": self.config,
            "sizer": self.sizer.describe(),
        })
    }
}
