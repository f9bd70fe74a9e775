//! The OTAS policy: every arrival joins the batch queue by Alg. 1; whenever an instance is idle
//! the queue is planned (Alg. 2, or Alg. 3 while it is short or service has just begun) and the
//! first batch in deadline order that the plan runs is started under its plan. Batches the plan
//! skips stay queued for the next decision (spec §2.9: work-conserving, receding horizon).
//! Before each decision every request that could not meet its deadline even if its batch ran
//! now under the fastest plan is evicted with `DeadlineUnreachable` (spec §2.8, outcome Type 4).
//! The paper has one engine; with several idle instances each decision plans the queue as if
//! for one, from the same clock.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use morph_core::time::{Seconds, ms_to_nanos, nanos_to_secs};
use morph_core::{
    Action, BatchPlan, DropReason, Event, Gauge, InstanceId, InstanceInfo, Policy, RequestId, RequestInfo,
    RuntimeSpec, Time, TokenPlan, UnitSpec,
};
use serde_json::json;

use super::batching::{self, Batch, Member};
use super::config::{OtasConfig, Switching};
use super::guard::{self, Burst, Bursts};
use super::manual;
use super::plan::{self, BatchCosts, Choice};
use super::plan_table::PlanTable;
use crate::replacer::Replacer;

/// What the policy counts, for its gauges.
#[derive(Debug, Default)]
struct Counts {
    batches: BTreeMap<TokenPlan, u64>,
    evicted: u64,
    by_dp: u64,
    by_rule: u64,
}

/// The length f(q) reads throughputs at before any request has arrived.
const DEFAULT_RATE_LEN: u32 = 32;

/// How often an INFaaS-like policy looks again while a switch is under way.
const SWITCH_TICK_MS: f64 = 10.0;

#[derive(Debug)]
pub struct OtasPolicy {
    name: String,
    config: OtasConfig,
    table: PlanTable,
    /// The batch queue B, in creation order.
    queue: Vec<Batch>,
    instances: BTreeMap<InstanceId, UnitSpec>,
    idle: BTreeSet<InstanceId>,
    /// What each busy instance runs, to queue again if its worker is lost.
    running: BTreeMap<InstanceId, Vec<Member>>,
    /// Arrival times within the rate window (q, spec A8), with each request's input length.
    arrivals: VecDeque<(Time, u32)>,
    /// Arrivals and their SLOs over the burst window, for the guard (none without it).
    bursts: Option<Bursts>,
    /// When service began (the first event): the initial stage runs Alg. 3 only.
    started: Option<Time>,
    replacer: Replacer,
    counts: Counts,
    /// INFaaS-like switching: the plan in use, a different choice and since when it has held,
    /// and the end of the switch under way.
    current: usize,
    candidate: Option<(usize, Time)>,
    blocked_until: Time,
}

impl OtasPolicy {
    /// `name` is the preset's; `table` holds `config.plans` in order, with their profiles.
    pub fn new(name: &str, config: OtasConfig, table: PlanTable) -> Self {
        let bursts = config.burst_guard.then(|| Bursts::new(config.burst_window_ms.nanos()));
        Self {
            name: name.to_string(),
            config,
            queue: Vec::new(),
            instances: BTreeMap::new(),
            idle: BTreeSet::new(),
            running: BTreeMap::new(),
            arrivals: VecDeque::new(),
            bursts,
            started: None,
            replacer: Replacer::default(),
            counts: Counts::default(),
            current: table.len() - 1,
            candidate: None,
            blocked_until: Time::ZERO,
            table,
        }
    }

    /// The runtime plans are priced on: the instances' (the first), or a dynamic one.
    fn runtime(&self) -> RuntimeSpec {
        self.instances.values().next().map_or(RuntimeSpec::dynamic(u32::MAX, u32::MAX), |u| u.runtime)
    }

    /// Rows a batch may hold: ε, and no more than the smallest instance takes.
    fn rows(&self) -> usize {
        let smallest = self.instances.values().map(|u| u.runtime.max_batch as usize).min();
        smallest.unwrap_or(usize::MAX)
    }

    fn longest_input(&self) -> Option<u32> {
        self.instances.values().map(|u| u.runtime.longest_taken()).max()
    }

    fn member(&self, r: &RequestInfo) -> Member {
        let service = r.service;
        Member {
            id: r.id,
            input_len: r.input_len,
            task: service.map(|s| s.task).unwrap_or_default(),
            arrival: r.arrival,
            deadline: service.and_then(|s| s.deadline).unwrap_or(Time(u64::MAX)),
            utility: service.map_or(self.config.default_utility, |s| f64::from(s.utility_micros) / 1e6),
        }
    }

    /// Forgets arrivals older than the rate window ending at `now`; returns the window.
    fn forget_old_arrivals(&mut self, now: Time) -> u64 {
        let window = self.config.rate_window_ms.nanos();
        while self.arrivals.front().is_some_and(|&(t, _)| now.since(t) > window) {
            self.arrivals.pop_front();
        }
        window
    }

    /// q: arrivals per second over the rate window ending at `now`.
    fn rate(&mut self, now: Time) -> f64 {
        let window = self.forget_old_arrivals(now);
        self.arrivals.len() as f64 / nanos_to_secs(window)
    }

    fn unreachable(member: &Member) -> DropReason {
        DropReason::DeadlineUnreachable { within: member.deadline.since(member.arrival) }
    }

    fn admit(&mut self, now: Time, request: RequestInfo, actions: &mut Vec<Action>) {
        self.forget_old_arrivals(now);
        self.arrivals.push_back((now, request.input_len));
        let member = self.member(&request);
        if let Some(bursts) = &mut self.bursts
            && member.deadline < Time(u64::MAX)
        {
            bursts.record(now, member.deadline.since(member.arrival));
        }
        let alone =
            Batch { opened: now, deadline: member.deadline, utility: member.utility, members: vec![member] };
        let fastest = self.table.estimate(&alone, 0, self.runtime()).0;
        let reason = match self.longest_input() {
            Some(max_len) if request.input_len > max_len => {
                Some(DropReason::NoRuntimeFits { len: request.input_len, max_len })
            }
            _ if self.queue_len() >= self.config.max_queue => {
                Some(DropReason::QueueFull { capacity: self.config.max_queue })
            }
            // Already impossible at arrival: alone, now, under the fastest plan it ends too late.
            _ if now.0.saturating_add(fastest) >= member.deadline.0 => Some(Self::unreachable(&member)),
            _ => None,
        };
        match reason {
            Some(reason) => actions.push(Action::Drop { request: request.id, reason }),
            None => {
                let rows = self.rows();
                batching::join(&mut self.queue, member, &self.config.batching, rows);
            }
        }
    }

    /// Spec §2.8: evicts every request that would end at or past its deadline even if its batch
    /// ran now under the fastest plan (each is answered once, here, and leaves the queue).
    fn evict(&mut self, now: Time, actions: &mut Vec<Action>) {
        let runtime = self.runtime();
        for batch in &mut self.queue {
            let ends = now.0.saturating_add(self.table.estimate(batch, 0, runtime).0);
            for gone in batch.remove_where(|m| ends >= m.deadline.0) {
                actions.push(Action::Drop { request: gone.id, reason: Self::unreachable(&gone) });
                self.counts.evicted += 1;
            }
        }
        self.queue.retain(|b| !b.members.is_empty());
    }

    /// One decision: the queue's batches in deadline order, their costs, and the plan for each.
    fn decide(&mut self, now: Time) -> (Vec<usize>, Vec<BatchCosts>, Vec<Choice>) {
        let runtime = self.runtime();
        let mut order: Vec<usize> = (0..self.queue.len()).collect();
        order.sort_by_key(|&b| self.queue[b].deadline); // Alg. 2 line 1 (stable: ties by age)
        let costs: Vec<BatchCosts> = order
            .iter()
            .map(|&b| {
                let batch = &self.queue[b];
                let by_plan = (0..self.table.len()).map(|l| self.table.estimate(batch, l, runtime)).collect();
                BatchCosts { deadline: batch.deadline, mean_utility: batch.mean_utility(), by_plan }
            })
            .collect();
        let started = *self.started.get_or_insert(now);
        let initial = now.since(started) < self.config.initial_ms.nanos();
        // Alg. 2 line 2: short queue or initial stage → Alg. 3.
        let choices = if let Some(switching) = self.config.switching {
            let rated = self.rated(now);
            let plan = self.switch(now, rated, switching);
            vec![Some(plan); costs.len()]
        } else if costs.len() <= self.config.beta || initial {
            self.counts.by_rule += 1;
            let rated = self.rated(now);
            manual::allocate(now, &costs, rated, self.config.kappa)
        } else {
            self.counts.by_dp += 1;
            plan::plan(now, &costs, self.config.skip)
        };
        (order, costs, choices)
    }

    /// The burst the guard keeps room for: the most arrivals seen within the shortest recent
    /// SLO, as work on the fastest plan in full batches, times the burst margin.
    fn burst(&self) -> Option<Burst> {
        let (arrivals, slo) = self.bursts.as_ref()?.peak()?;
        let rows = self.config.batching.epsilon.min(self.rows()) as u32;
        let len = self.config.rate_len.unwrap_or_else(|| self.full_batch_len(rows));
        let per_second = self.table.throughput(0, rows, len);
        let work = self.config.burst_margin * arrivals as f64 / per_second;
        Some(Burst { work: Seconds(work).nanos(), slo })
    }

    /// f(q): the most accurate plan whose throughput exceeds the current arrival rate.
    fn rated(&mut self, now: Time) -> usize {
        let q = self.rate(now);
        let rows = self.config.batching.epsilon.min(self.rows()) as u32;
        let len = self.config.rate_len.unwrap_or_else(|| self.full_batch_len(rows));
        let mu: Vec<f64> = (0..self.table.len()).map(|l| self.table.throughput(l, rows, len)).collect();
        manual::rate_plan(q, &mu)
    }

    /// The padded length a full batch of `rows` of the requests arriving now would run at: the
    /// expected longest of `rows` draws, the rows/(rows + 1) quantile of the input lengths in
    /// the rate window. A fixed length instead misjudges what each plan sustains: too long and
    /// f(q) gives up accuracy at low load, too short and it keeps slow plans past capacity.
    fn full_batch_len(&self, rows: u32) -> u32 {
        let mut lengths: Vec<u32> = self.arrivals.iter().map(|a| a.1).collect();
        if lengths.is_empty() {
            return DEFAULT_RATE_LEN;
        }
        let q = f64::from(rows) / f64::from(rows + 1);
        let at = ((lengths.len() - 1) as f64 * q).round() as usize;
        let (_, nth, _) = lengths.select_nth_unstable(at);
        (*nth).max(1)
    }

    /// INFaaS-like: keeps the plan in use until another choice has held for `hold_ms`, then
    /// switches to it, blocking the engine for `cost_ms`.
    fn switch(&mut self, now: Time, rated: usize, switching: Switching) -> usize {
        match self.candidate {
            _ if rated == self.current => self.candidate = None,
            Some((plan, since)) if plan == rated && now.since(since) >= switching.hold_ms.nanos() => {
                self.current = rated;
                self.candidate = None;
                self.blocked_until = now + switching.cost_ms.nanos();
            }
            Some((plan, _)) if plan == rated => {}
            _ => self.candidate = Some((rated, now)),
        }
        self.current
    }

    fn schedule(&mut self, now: Time, actions: &mut Vec<Action>) {
        while let Some(&instance) = self.idle.first() {
            if now < self.blocked_until {
                return; // switching variants: the engine is loading
            }
            self.evict(now, actions);
            if self.queue.is_empty() {
                return;
            }
            let (order, costs, choices) = self.decide(now);
            if now < self.blocked_until {
                return; // a switch has just begun
            }
            // The first batch in deadline order that the plan runs; none: wait for the next event.
            let Some((k, l)) = choices.iter().enumerate().find_map(|(k, c)| c.map(|l| (k, l))) else {
                return;
            };
            let b = order[k];
            let l = match &self.bursts {
                Some(_) if self.config.switching.is_none() => {
                    guard::affordable(now, &costs, k, l, self.burst())
                }
                _ => l,
            };
            let mut batch = self.queue.remove(b);
            let rows = self.instances[&instance].runtime.max_batch as usize;
            if batch.members.len() > rows {
                let rest = batch.members.split_off(rows);
                self.queue.insert(b, Batch { members: rest, ..batch.clone() });
            }
            let plan = self.table.plan(l);
            *self.counts.batches.entry(plan).or_default() += 1;
            self.idle.remove(&instance);
            let requests = batch.members.iter().map(|m| m.id).collect();
            actions.push(Action::Run {
                instance,
                requests,
                plan: BatchPlan { tokens: plan, ..BatchPlan::FINISH },
            });
            self.running.insert(instance, batch.members);
        }
    }

    fn instance_up(&mut self, InstanceInfo { id, unit, .. }: InstanceInfo) {
        self.instances.insert(id, unit);
        self.idle.insert(id);
    }

    /// A lost instance is replaced; its `retried` requests join the queue again (Alg. 1), with
    /// their own arrival times and deadlines.
    fn lost(&mut self, instance: InstanceId, retried: &[RequestId], actions: &mut Vec<Action>) {
        self.idle.remove(&instance);
        let ran = self.running.remove(&instance).unwrap_or_default();
        if let Some(unit) = self.instances.remove(&instance) {
            self.replacer.replace(unit, actions);
        }
        let rows = self.rows();
        for member in ran.into_iter().filter(|m| retried.contains(&m.id)) {
            batching::join(&mut self.queue, member, &self.config.batching, rows);
        }
    }

    fn cancelled(&mut self, request: RequestId) {
        for batch in &mut self.queue {
            batch.remove_where(|m| m.id == request);
        }
        self.queue.retain(|b| !b.members.is_empty());
    }
}

impl Policy for OtasPolicy {
    fn name(&self) -> &str {
        &self.name
    }

    fn on_event(&mut self, now: Time, event: Event, actions: &mut Vec<Action>) {
        self.started.get_or_insert(now);
        self.replacer.retry_due(now, actions);
        match event {
            Event::InstanceUp { instance, .. } => self.instance_up(instance),
            Event::Arrival(request) => self.admit(now, request, actions),
            Event::Cancelled { request } => self.cancelled(request),
            Event::BatchDone { instance, .. } => {
                self.running.remove(&instance);
                if self.instances.contains_key(&instance) {
                    self.idle.insert(instance);
                }
            }
            Event::InstanceLost { instance, retried, .. } => self.lost(instance, &retried, actions),
            Event::LaunchFailed { unit, .. } => self.replacer.launch_failed(now, unit),
            Event::Tick | Event::SlotsChanged { .. } | Event::SequencesDone { .. } => {}
        }
        self.schedule(now, actions);
    }

    fn queue_len(&self) -> usize {
        self.queue.iter().map(|b| b.members.len()).sum()
    }

    /// Switching needs a wake-up when a switch ends; OTAS itself runs on events alone.
    fn tick_interval(&self) -> Option<morph_core::Nanos> {
        self.config.switching.map(|_| ms_to_nanos(SWITCH_TICK_MS))
    }

    fn gauges(&self) -> Vec<Gauge> {
        let c = &self.counts;
        let mut gauges = vec![
            Gauge::new(
                "otas_queued_batches",
                "OTAS: batches waiting for an instance.",
                self.queue.len() as f64,
            ),
            Gauge::new(
                "otas_evicted_total",
                "OTAS: requests evicted from a batch that could not meet their deadlines.",
                c.evicted as f64,
            ),
            Gauge::new(
                "otas_decisions_total",
                "OTAS: batch plans chosen, by rule (dp: Alg. 3's split; rate: the arrival-rate rule).",
                c.by_dp as f64,
            )
            .label("rule", "dp"),
            Gauge::new(
                "otas_decisions_total",
                "OTAS: batch plans chosen, by rule (dp: Alg. 3's split; rate: the arrival-rate rule).",
                c.by_rule as f64,
            )
            .label("rule", "rate"),
        ];
        for (plan, n) in &c.batches {
            gauges.push(
                Gauge::new("otas_batches_total", "OTAS: batches run, by token plan.", *n as f64)
                    .label("plan", plan.to_string()),
            );
        }
        gauges
    }

    fn describe(&self) -> serde_json::Value {
        json!({ "name": self.name, "config": self.config })
    }
}
