//! The discrete-event driver: the same [`Policy`] objects as the live server, in virtual time,
//! their actions applied through the same [`Ledger`]. Arrivals come from the pre-generated
//! stream (merged with the event queue, in the same total order), batch times from the cost
//! model, instances from the policy's launches after a start-up delay, ticks from the policy's
//! interval, cancellations from each request's `cancel_after`. Encoder batches end as a unit;
//! generations run by iterations (one token of every running sequence), each answered when its
//! output ends, with the semantics written in `morph_core::policy`.

use std::collections::HashMap;
use std::sync::Arc;

use morph_core::{
    BatchPlan, Effect, Generation, HostId, HostSlots, IdWindow, InitialPlacement, InstanceId, Launched,
    Ledger, Nanos, NewRequest, OnViolation, Pending, Policy, RequestId, StageTimes, StartKind, StepBudget,
    StepPlan, Ticket, Time, TokenPlan, UnitKind, UnitSpec,
};

use crate::cost::{CostModel, Decoding, Fed, Job, Startup};
use crate::event::{EventKind, EventQueue, SimEvent};
use crate::hosts::{Hosts, startup_time};
use crate::metrics::{Recorder, Report};
use crate::utility::UtilityAccount;
use crate::workload::{Correctness, SimRequest};

/// How a run is measured, where instances run and how they start.
#[derive(Debug, Clone)]
pub struct SimOptions {
    /// Decides goodput and SLO attainment.
    pub slo: Option<Nanos>,
    /// Requests arriving before this are served and reported apart from the measured ones
    /// ([`Report::warmup`]); 0: everything from t = 0 is measured.
    pub warmup: Nanos,
    /// Width of the report's timeline intervals ([`Report::timeline`]).
    pub interval: Nanos,
    /// Keep how each request ended ([`Report::answers`]): memory per request, for tests and
    /// small runs.
    pub per_request: bool,
    /// Which answers are correct under which plan (OTAS's query types): the report then keeps
    /// the utility account ([`Report::utility`]).
    pub correctness: Option<Arc<Correctness>>,
    /// The whole model's start-up times; a pipeline stage takes its share of the layers.
    pub startup: Startup,
    /// Device slots per host (default: one host with room for every instance).
    pub hosts: HostSlots,
    /// Memory per host for cached parameters, and the whole model's parameters.
    pub cache_bytes: u64,
    pub model_bytes: u64,
    /// The pipeline, for stages' shares of start-up time and parameters.
    pub pipeline: Option<Arc<StageTimes>>,
    /// Chunked prefill, as the decoder runs it (`morph serve --prefill-chunk`): a prompt feeds
    /// at most this many tokens per iteration and samples its first token in the iteration its
    /// last chunk is fed; 0 feeds each prompt whole in its first iteration.
    pub prefill_chunk: u32,
}

impl Default for SimOptions {
    fn default() -> Self {
        Self {
            slo: None,
            warmup: 0,
            interval: 1_000_000_000,
            per_request: false,
            correctness: None,
            startup: Startup::default(),
            hosts: HostSlots::new(1, u16::MAX),
            cache_bytes: u64::MAX,
            model_bytes: 0,
            pipeline: None,
            prefill_chunk: 0,
        }
    }
}

impl SimOptions {
    /// Most prompt tokens a sequence feeds in one step (`prefill_chunk`, 0 being no bound).
    fn chunk(&self) -> u32 {
        StepBudget { prefill_chunk: self.prefill_chunk, step_prompt_tokens: None }.chunk()
    }

    /// The share of the model `unit` holds (its layers of a pipeline; else all of it).
    fn share(&self, unit: &UnitSpec) -> f64 {
        self.pipeline.as_ref().map_or(1.0, |p| p.layer_share(unit))
    }
}

/// A generation on an instance: its prompt tokens not fed yet, the tokens it has left to
/// produce, and whether it computes in the current step.
struct Sequence {
    id: RequestId,
    unfed: u32,
    left: u32,
    member: bool,
}

/// A simulated instance: its unit and host, and the generations it iterates (a decoder's; kept
/// apart so that the instances, tens of thousands at scale, stay small in the cache).
struct Instance {
    unit: UnitSpec,
    host: HostId,
    seqs: Box<Iterations>,
}

impl Instance {
    fn new(unit: UnitSpec, host: HostId) -> Self {
        Self { unit, host, seqs: Box::default() }
    }
}

/// A decoder's generations, by iteration.
#[derive(Default)]
struct Iterations {
    /// Sequences in the current iteration, and sequences that joined during it (or a static
    /// batch's, before its first), for the next.
    stepping: Vec<Sequence>,
    joining: Vec<RequestId>,
    /// Sequences whose client left: reported finished at the end of the current iteration.
    stopped: Vec<RequestId>,
    /// What the sequences left would feed next, as the last iteration's report says.
    pending: Vec<Pending>,
}

impl Iterations {
    /// Starts the next iteration as `plan` says, every joined sequence now in the batch: each
    /// sequence it names feeds its last token, or its prompt's next chunk (at most the plan's
    /// tokens and `chunk`); returns its time.
    fn start_step(
        &mut self,
        unit: &UnitSpec,
        cost: &dyn CostModel,
        live: &IdWindow<Live>,
        chunk: u32,
        plan: &StepPlan,
    ) -> Nanos {
        let request = |id: RequestId| *live_request(live, id);
        let fresh = self.joining.drain(..).map(|id| {
            let r = request(id);
            Sequence { id, unfed: r.input_len, left: r.output_len.max(1), member: false }
        });
        self.stepping.extend(fresh);
        let (mut fed, mut decoding, mut members) = (Fed::default(), Decoding::default(), 0);
        for s in &mut self.stepping {
            let tokens = plan.tokens_of(s.id);
            s.member = tokens.is_some();
            let Some(tokens) = tokens else { continue };
            members += 1;
            let r = request(s.id);
            if s.unfed == 0 {
                // Its prompt and the tokens it produced, the last of which it feeds now.
                let produced = r.output_len.max(1) - s.left;
                decoding.sequences += 1;
                decoding.context += r.input_len + produced;
                continue;
            }
            let n = s.unfed.min(chunk).min(tokens);
            fed.before += r.input_len - s.unfed;
            fed.now += n;
            s.unfed -= n;
        }
        cost.step_time(unit, members, fed, decoding)
    }

    /// Ends the iteration: the sequences that produced their last token or were stopped; what
    /// the others would feed next is in `pending` (each prompt's next piece at most `chunk`).
    fn end_step(&mut self, chunk: u32) -> Vec<RequestId> {
        let mut finished = Vec::new();
        let stopped = std::mem::take(&mut self.stopped);
        self.stepping.retain_mut(|s| {
            // A member whose prompt is all fed sampled a token in this iteration.
            if s.member && s.unfed == 0 {
                s.left -= 1;
            }
            let done = s.left == 0 || stopped.contains(&s.id);
            if done {
                finished.push(s.id);
            }
            !done
        });
        self.joining.retain(|r| {
            let gone = stopped.contains(r);
            if gone {
                finished.push(*r);
            }
            !gone
        });
        self.pending.clear();
        self.pending.extend(self.stepping.iter().map(|s| Pending {
            request: s.id,
            prompt_left: s.unfed,
            piece: s.unfed.min(chunk),
        }));
        finished
    }

    fn has_work(&self) -> bool {
        !self.stepping.is_empty() || !self.joining.is_empty()
    }
}

/// One computation of an instance: an encoder batch (its plan and requests) or a decoder
/// iteration (`batch: None`), on `threads` cores for `took`.
#[derive(Debug)]
pub(crate) struct Computation {
    pub(crate) instance: InstanceId,
    pub(crate) threads: u64,
    pub(crate) took: Nanos,
    batch: Option<(BatchPlan, Vec<RequestId>)>,
}

/// A model's side of a shared host ([`crate::host`]): its computations ask the host's cores
/// instead of starting at once, and say when they end.
#[derive(Debug, Default)]
pub(crate) struct CoreAsks {
    /// Computations that want cores, not yet in the host's line.
    pub(crate) asked: Vec<Computation>,
    /// Instances whose computation ended, not yet given back.
    pub(crate) ended: Vec<InstanceId>,
    /// Computations in the host's line (kept by the host): ticks go on while any wait.
    pub(crate) waiting: usize,
}

/// A request not answered yet, and the plan and end of the batch it runs in.
#[derive(Debug)]
struct Live {
    request: SimRequest,
    ran: Option<(TokenPlan, Time)>,
}

/// The request `id`, which is running or in a batch, so not answered yet.
fn live_request(live: &IdWindow<Live>, id: RequestId) -> &SimRequest {
    &live.get(id.0).expect("a running request is live").request
}

/// The simulated world the ledger's effects are carried out in.
pub(crate) struct World<'a> {
    cost: &'a dyn CostModel,
    /// Requests arrived and not answered, by id.
    live: IdWindow<Live>,
    options: &'a SimOptions,
    /// Indexed by instance id (the ledger hands them out in order).
    instances: Vec<Option<Instance>>,
    /// Launches in flight: what, where, how each will start and how long it takes.
    launching: HashMap<Ticket, (UnitSpec, HostId, StartKind, Nanos)>,
    /// Launches refused for want of a slot, with why.
    refused: HashMap<Ticket, String>,
    hosts: Hosts,
    /// Threads of the instances holding a slot (launching ones included).
    cores: u64,
    /// New instances may start warm from host memory (the policy's choice).
    host_cache: bool,
    /// Set when the model shares a host's cores with others.
    pub(crate) shared: Option<CoreAsks>,
    events: EventQueue,
    rec: Recorder,
    /// The batch being priced (kept to reuse its allocation).
    jobs: Vec<Job>,
}

impl World<'_> {
    /// Bytes of `unit`'s parameters.
    fn bytes(&self, unit: &UnitSpec) -> u64 {
        (self.options.model_bytes as f64 * self.options.share(unit)).round() as u64
    }

    fn instance(&mut self, id: InstanceId) -> Option<&mut Instance> {
        self.instances.get_mut(id.0 as usize).and_then(Option::as_mut)
    }

    /// Asks the cache ahead for what the next two batch ends will touch: the instances' records
    /// for the one after next, their batches' lists and first requests for the next (whose
    /// records were asked for one event earlier). At tens of thousands of instances these are
    /// spread over megabytes, and a batch end would otherwise wait on each in turn.
    fn prefetch_ahead(&self, ledger: &Ledger) {
        let [next, after] = self.events.next_two();
        if let Some(SimEvent::BatchDone { instance, .. }) = after {
            ledger.prefetch_instance(instance);
            self.prefetch_instance(instance);
        }
        if let Some(SimEvent::BatchDone { instance, first }) = next {
            ledger.prefetch_batch(instance, first);
            self.live.prefetch(first.0);
        }
    }

    /// Asks the cache for the driver's record of `id`, which a batch starts on soon.
    fn prefetch_instance(&self, id: InstanceId) {
        if let Some(record) = self.instances.get(id.0 as usize) {
            morph_core::prefetch::prefetch(record);
        }
    }

    /// Starts the next iteration on `id` as `plan` says.
    fn step(&mut self, now: Time, id: InstanceId, plan: &StepPlan) {
        let (cost, chunk) = (self.cost, self.options.chunk());
        let Some(inst) = self.instances.get_mut(id.0 as usize).and_then(Option::as_mut) else { return };
        let seqs = &mut inst.seqs;
        if !seqs.has_work() {
            return;
        }
        let took = seqs.start_step(&inst.unit, cost, &self.live, chunk, plan);
        let threads = threads(&inst.unit);
        self.compute(now, Computation { instance: id, threads, took, batch: None });
    }

    /// `id`'s computation ended: on a shared host, its cores go back.
    fn ended(&mut self, id: InstanceId) {
        if let Some(asks) = &mut self.shared {
            asks.ended.push(id);
        }
    }

    /// Starts `c` now, or, on a shared host, asks the host's cores for it.
    fn compute(&mut self, now: Time, c: Computation) {
        match &mut self.shared {
            Some(asks) => asks.asked.push(c),
            None => self.started(now, c),
        }
    }

    /// `c` starts now: its end is due after the time it takes.
    pub(crate) fn started(&mut self, now: Time, c: Computation) {
        let end = now + c.took;
        self.rec.busy(c.instance.0 as usize, c.took);
        let Some((plan, batch)) = c.batch else {
            self.events.push(end, SimEvent::StepDone(c.instance));
            return;
        };
        let request = |r: &RequestId| live_request(&self.live, *r);
        if batch.first().is_some_and(|r| request(r).service.is_some()) {
            let running: Vec<&SimRequest> = batch.iter().map(request).collect();
            self.rec.served(plan.tokens, end, &running);
        }
        for r in &batch {
            if let Some(l) = self.live.get_mut(r.0) {
                l.ran = Some((plan.tokens, end));
            }
        }
        // A batch holds a request (the ledger refuses an empty one); the id past every window
        // would only make the hint ask for nothing.
        let first = batch.first().copied().unwrap_or(RequestId(u64::MAX));
        self.events.push(end, SimEvent::BatchDone { instance: c.instance, first });
    }

    fn carry_out(&mut self, now: Time, ledger: &Ledger, effects: &mut Vec<Effect>) {
        for effect in effects.drain(..) {
            match effect {
                Effect::Run { instance, requests: batch, plan } => {
                    let cost = self.cost;
                    let Some(inst) = self.instances.get_mut(instance.0 as usize).and_then(Option::as_mut)
                    else {
                        continue;
                    };
                    // A static batch of generations: its steps follow ([`Effect::Step`]).
                    if inst.unit.kind == UnitKind::Generation {
                        inst.seqs.joining = batch;
                        continue;
                    }
                    let live = &self.live;
                    self.jobs.clear();
                    self.jobs.extend(
                        batch
                            .iter()
                            .map(|r| live_request(live, *r))
                            .map(|r| Job { input_len: r.input_len, output_len: r.output_len }),
                    );
                    let took = cost.batch_time(&inst.unit, plan.tokens, &self.jobs);
                    let threads = threads(&inst.unit);
                    self.compute(now, Computation { instance, threads, took, batch: Some((plan, batch)) });
                }
                Effect::Join { instance, requests } => {
                    if let Some(inst) = self.instance(instance) {
                        inst.seqs.joining.extend(requests);
                    }
                }
                Effect::Step { instance, plan } => self.step(now, instance, &plan),
                Effect::Cancel { instance, request } => {
                    if let Some(inst) = self.instance(instance) {
                        inst.seqs.stopped.push(request);
                    }
                }
                Effect::Launch { ticket, unit, host } => {
                    match self.hosts.take(host, threads(&unit) as u32) {
                        Ok(host) => {
                            let (startup, share) = (&self.options.startup, self.options.share(&unit));
                            let times = Startup {
                                cold: startup_time(startup, false, share),
                                warm: startup_time(startup, true, share),
                            };
                            let (warm, took) = self.hosts.start(host, &unit, now, self.host_cache, times);
                            let start = if warm { StartKind::Warm } else { StartKind::Cold };
                            self.launching.insert(ticket, (unit, host, start, took));
                            self.cores += threads(&unit);
                            self.events.push(now + took, SimEvent::InstanceUp(ticket));
                        }
                        Err(reason) => {
                            self.refused.insert(ticket, reason);
                            self.events.push(now, SimEvent::LaunchFailed(ticket));
                        }
                    }
                    self.rec.slots(now, ledger.slots(), self.cores);
                }
                Effect::Preload { unit, host } if self.host_cache => {
                    let took = startup_time(&self.options.startup, false, self.options.share(&unit));
                    let bytes = self.bytes(&unit);
                    self.hosts.preload(host, &unit, bytes, now, took);
                }
                Effect::Preload { .. } => {}
                Effect::Retire { instance } => {
                    if let Some(slot) = self.instances.get_mut(instance.0 as usize)
                        && let Some(gone) = slot.take()
                    {
                        self.hosts.free(gone.host, threads(&gone.unit) as u32);
                        self.cores -= threads(&gone.unit);
                    }
                    self.rec.slots(now, ledger.slots(), self.cores);
                }
                Effect::Answer { request, outcome } => {
                    let Some(live) = self.live.remove(request.0) else { continue };
                    self.rec.answered(request.0 as usize, &live.request, &outcome, now, live.ran);
                }
                // Activations are the live driver's; a simulated stage hands on nothing.
                Effect::Forward { .. } => {}
                Effect::Refused(violation) => unreachable!("a strict ledger panics first: {violation}"),
            }
        }
    }
}

/// The threads a unit holds (its engine's default counts as one).
fn threads(unit: &UnitSpec) -> u64 {
    u64::from(unit.threads.unwrap_or(1))
}

/// Runs `requests`, in arrival order (as [`crate::workload::Predictor::tell`] left them),
/// through `policy` on `cluster` (one unit per initial instance; for a policy that lays out its
/// own, the caller passes [`Policy::layout`]), with batch times from `cost`. The stream is taken
/// as the run goes and only requests not yet answered are held, so memory does not grow with
/// its length. Instances the policy launches come up after the start-up delay; retired ones
/// free their slot at once. A policy that breaks a ledger rule panics.
pub fn simulate(
    policy: Box<dyn Policy>,
    cluster: &[UnitSpec],
    cost: &dyn CostModel,
    requests: impl IntoIterator<Item = SimRequest>,
    options: &SimOptions,
) -> Report {
    let mut run = ModelRun::new(policy, cluster, cost, requests, options, None);
    while run.advance().is_some() {}
    run.finish()
}

/// One model's run: its world, its ledger and the arrivals still to come, advanced one event at
/// a time ([`simulate`] runs one; [`crate::host`] interleaves several on one host's cores).
pub(crate) struct ModelRun<'a, I: Iterator<Item = SimRequest>> {
    pub(crate) world: World<'a>,
    pub(crate) ledger: Ledger,
    requests: std::iter::Peekable<I>,
    tick: Option<Nanos>,
    effects: Vec<Effect>,
}

impl<'a, I: Iterator<Item = SimRequest>> ModelRun<'a, I> {
    /// Sets up the initial instances at t = 0 (`shared`: the model shares a host's cores).
    pub(crate) fn new(
        policy: Box<dyn Policy>,
        cluster: &[UnitSpec],
        cost: &'a dyn CostModel,
        requests: impl IntoIterator<Item = SimRequest, IntoIter = I>,
        options: &'a SimOptions,
        shared: Option<CoreAsks>,
    ) -> Self {
        let warmup = Time(options.warmup);
        let utility = options.correctness.clone().map(|table| UtilityAccount::new(table, warmup));
        let rec =
            Recorder::new(cluster.len(), warmup, options.slo, options.interval, options.per_request, utility);
        let mut world = World {
            cost,
            live: IdWindow::default(),
            options,
            instances: Vec::with_capacity(cluster.len()),
            launching: HashMap::new(),
            refused: HashMap::new(),
            hosts: Hosts::new(&options.hosts, options.cache_bytes),
            cores: cluster.iter().map(threads).sum(),
            host_cache: policy.host_cache(),
            shared,
            events: EventQueue::default(),
            rec,
            jobs: Vec::new(),
        };
        let spread = policy.initial_placement() == InitialPlacement::Spread;
        let mut ledger = Ledger::new(policy, OnViolation::Panic);
        let mut effects = Vec::new();
        for (i, unit) in cluster.iter().enumerate() {
            let want = spread.then(|| world.hosts.spread(i, threads(unit) as u32)).flatten();
            let host =
                world.hosts.take(want, threads(unit) as u32).expect("the hosts hold the initial layout");
            world.hosts.loaded(host, unit, world.bytes(unit), Time::ZERO);
            world.instances.push(Some(Instance::new(*unit, host)));
            ledger.add_instance(Time::ZERO, *unit, host, &mut effects);
        }
        world.rec.slots(Time::ZERO, ledger.slots(), world.cores);
        world.carry_out(Time::ZERO, &ledger, &mut effects);
        let tick = ledger.policy().tick_interval();
        if let Some(every) = tick {
            world.events.push(Time(every), SimEvent::Tick);
        }
        Self { world, ledger, requests: requests.into_iter().peekable(), tick, effects }
    }

    /// When the next thing happens, and what kind it is: the earlier of the event queue's head and
    /// the next arrival, in the total order (time, kind, sequence); arrivals keep their order.
    pub(crate) fn next(&mut self) -> Option<(Time, EventKind)> {
        let arrival = self.requests.peek().map(|r| (r.arrival, EventKind::Arrival));
        match (arrival, self.world.events.peek()) {
            (Some(a), Some(e)) => Some(if a < e { a } else { e }),
            (a, e) => a.or(e),
        }
    }

    /// Takes the next thing and carries out what the policy does about it; its time, or `None`
    /// when nothing is left to happen.
    pub(crate) fn advance(&mut self) -> Option<Time> {
        let (_, kind) = self.next()?;
        let (world, ledger, effects) = (&mut self.world, &mut self.ledger, &mut self.effects);
        let now;
        if kind == EventKind::Arrival {
            let r = self.requests.next()?;
            now = r.arrival;
            let generation = (r.output_len > 0).then_some(Generation {
                max_tokens: r.max_tokens,
                predicted: r.predicted,
                cached: 0,
            });
            let new = NewRequest { input_len: r.input_len, generation, service: r.service };
            let id = ledger.arrive(now, new, effects);
            let kept = world.live.push(Live { request: r, ran: None });
            debug_assert_eq!(id.0, kept, "ledger ids follow the stream");
            world.rec.arrived(now);
            if let Some(after) = r.cancel_after {
                world.events.push(now + after, SimEvent::Cancel(id));
            }
        } else {
            let (t, e) = world.events.pop()?;
            now = t;
            world.prefetch_ahead(ledger);
            match e {
                SimEvent::StepDone(id) => {
                    world.ended(id);
                    let chunk = world.options.chunk();
                    if let Some(inst) = world.instance(id) {
                        let finished = inst.seqs.end_step(chunk);
                        ledger.iteration_done(now, id, &finished, false, &inst.seqs.pending, effects);
                    }
                }
                SimEvent::BatchDone { instance: id, .. } => {
                    world.ended(id);
                    ledger.batch_done(now, id, false, None, effects);
                }
                SimEvent::InstanceUp(ticket) => {
                    if let Some((unit, host, start, took)) = world.launching.remove(&ticket) {
                        let launched = Launched { ticket, host, start, took };
                        // The policy may retire it at once: that effect is carried out below.
                        if let Some(id) = ledger.launch_up(now, launched, effects) {
                            debug_assert_eq!(id.0 as usize, world.instances.len());
                            world.hosts.loaded(host, &unit, world.bytes(&unit), now);
                            world.instances.push(Some(Instance::new(unit, host)));
                        }
                    }
                }
                SimEvent::LaunchFailed(ticket) => {
                    let reason = world.refused.remove(&ticket).unwrap_or_default();
                    ledger.launch_failed(now, ticket, reason, effects);
                }
                SimEvent::Cancel(request) => ledger.cancel(now, request, effects),
                SimEvent::Tick => {
                    // Ticks stop once nothing is left to happen: no arrivals to come, nothing
                    // running or waiting for cores, and nothing waiting for a tick (a batching
                    // timeout).
                    let busy = self.requests.peek().is_some()
                        || !world.events.is_empty()
                        || world.shared.as_ref().is_some_and(|asks| asks.waiting > 0)
                        || ledger.policy().queue_len() > 0;
                    if let Some(every) = self.tick
                        && busy
                    {
                        world.events.push(now + every, SimEvent::Tick);
                    }
                    ledger.tick(now, effects);
                    if now >= Time(world.options.warmup) {
                        world.rec.gauges(now, ledger.policy().gauges());
                    }
                }
            }
        }
        world.carry_out(now, ledger, effects);
        world.rec.queue(now, ledger.policy().queue_len());
        if let Some(next) = ledger.prefetch_next_start() {
            world.prefetch_instance(next);
        }
        Some(now)
    }

    /// The run's report.
    pub(crate) fn finish(self) -> Report {
        let (rec, policy, state) = self.recording();
        rec.report(policy, state)
    }

    /// What the run recorded, its policy's name and its account of itself at the end.
    pub(crate) fn recording(self) -> (Recorder, String, serde_json::Value) {
        let mut world = self.world;
        world.rec.cold_starts = world.hosts.cold;
        world.rec.warm_starts = world.hosts.warm;
        world.rec.evictions = world.hosts.evicted;
        let policy = self.ledger.policy();
        (world.rec, policy.name().to_string(), policy.describe())
    }
}

#[cfg(test)]
mod tests {
    use morph_core::fixtures::flat_profile;
    use morph_core::{Outcome, RuntimeSpec};
    use morph_policy::{DynamicBatching, DynamicBatchingConfig};

    use super::*;
    use crate::cost::ProfileCost;

    /// `ms` per batch whatever its length and size (up to 4 rows).
    fn flat(ms: f64) -> ProfileCost {
        ProfileCost::new(flat_profile(ms, 4), 1.0)
    }

    fn fifo() -> Box<dyn Policy> {
        Box::new(DynamicBatching::new(DynamicBatchingConfig {
            max_batch_tokens: 1 << 30,
            max_queue: usize::MAX,
            ..Default::default()
        }))
    }

    fn at(ms: &[f64]) -> Vec<SimRequest> {
        ms.iter().map(|t| SimRequest::new(Time::from_millis_f64(*t), 10, 0)).collect()
    }

    /// Options that keep each request's answer.
    fn each(slo: Option<Nanos>) -> SimOptions {
        SimOptions { slo, per_request: true, ..SimOptions::default() }
    }

    /// Each request's latency in ms, in stream order (every one answered).
    fn latencies(r: &Report) -> Vec<f64> {
        r.answers.iter().map(|a| a.as_ref().expect("answered").latency as f64 / 1e6).collect()
    }

    #[test]
    fn hand_computed_queueing_on_one_instance() {
        // Service 10 ms, one row per batch: arrivals at 0, 1, 2 ms finish at 10, 20, 30 ms.
        let r = simulate(
            fifo(),
            &[UnitSpec::batch(RuntimeSpec::dynamic(512, 1))],
            &flat(10.0),
            at(&[0.0, 1.0, 2.0]),
            &each(Some(20_000_000)),
        );
        assert_eq!((r.measured.completed, r.measured.dropped, r.measured.late), (3, 0, 1));
        assert_eq!(latencies(&r), vec![10.0, 19.0, 28.0]);
        assert!((r.measured.mean_latency_ms - 19.0).abs() < 1e-12);
        assert!((r.measured.slo_attainment - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(r.duration_s, 0.03);
        assert_eq!(r.mean_utilisation, 1.0);
        assert!((r.instance_seconds - 0.03).abs() < 1e-12 && (r.core_seconds - 0.03).abs() < 1e-12);
    }

    #[test]
    fn an_instance_costs_its_threads_in_core_seconds() {
        // Three 10 ms batches on one 4-thread instance: 0.03 instance-seconds, 0.12 core-seconds.
        let r = simulate(
            fifo(),
            &[UnitSpec::batch(RuntimeSpec::dynamic(512, 1)).with_threads(4)],
            &flat(10.0),
            at(&[0.0, 1.0, 2.0]),
            &SimOptions::default(),
        );
        assert!((r.instance_seconds - 0.03).abs() < 1e-12, "{}", r.instance_seconds);
        assert!((r.core_seconds - 0.12).abs() < 1e-12, "{}", r.core_seconds);
    }

    #[test]
    fn an_idle_instance_freed_at_an_arrival_takes_it_at_once() {
        // The batch done at 10 ms comes before the arrival at 10 ms (kind order).
        let r = simulate(
            fifo(),
            &[UnitSpec::batch(RuntimeSpec::dynamic(512, 1))],
            &flat(10.0),
            at(&[0.0, 10.0]),
            &each(None),
        );
        assert_eq!(latencies(&r), vec![10.0, 10.0]);
    }

    #[test]
    fn impatient_clients_cancel_what_waits_and_discard_what_runs() {
        // 10 ms per batch of one; clients give up after 15 ms. The first is answered at 10; the
        // second runs 10–20 but its client leaves at 16 (computed, then discarded); the third
        // leaves the queue at 17.
        let impatient: Vec<SimRequest> = at(&[0.0, 1.0, 2.0])
            .into_iter()
            .map(|r| SimRequest { cancel_after: Some(15_000_000), ..r })
            .collect();
        let r = simulate(
            fifo(),
            &[UnitSpec::batch(RuntimeSpec::dynamic(512, 1))],
            &flat(10.0),
            impatient,
            &each(None),
        );
        assert_eq!((r.measured.completed, r.measured.cancelled, r.measured.dropped), (1, 2, 0));
        let outcomes: Vec<Outcome> = r.answers.iter().map(|a| a.clone().unwrap().outcome).collect();
        assert_eq!(outcomes, vec![Outcome::Done, Outcome::Cancelled, Outcome::Cancelled]);
        assert_eq!(r.answers[0].as_ref().unwrap().latency, 10_000_000);
        assert_eq!(r.duration_s, 0.02, "the discarded batch still ran to its end");
    }

    #[test]
    fn the_timeline_counts_each_request_in_the_interval_it_arrived_in() {
        // 10 ms batches of one, arrivals at 0, 1, 2 ms and 15 ms, intervals of 10 ms, SLO 15 ms:
        // the first three wait behind each other (10, 19, 28 ms: two late), the fourth starts at
        // 30 ms (25 ms: late); the queue held two at most.
        let r = simulate(
            fifo(),
            &[UnitSpec::batch(RuntimeSpec::dynamic(512, 1))],
            &flat(10.0),
            at(&[0.0, 1.0, 2.0, 15.0]),
            &SimOptions { slo: Some(15_000_000), interval: 10_000_000, ..SimOptions::default() },
        );
        let t = &r.timeline;
        assert!(t.len() >= 2, "{t:?}");
        assert_eq!((t[0].arrived, t[0].completed, t[0].late, t[0].max_queue), (3, 3, 2, 2));
        assert!((t[0].mean_latency_ms - 19.0).abs() < 1e-9 && t[0].max_latency_ms == 28.0);
        assert_eq!((t[1].start_s, t[1].arrived, t[1].late), (0.01, 1, 1));
        assert_eq!(t.iter().map(|i| i.arrived).sum::<usize>(), r.measured.requests);
    }

    #[test]
    fn a_warm_up_is_reported_beside_the_measured_window_never_dropped() {
        // A queue-of-one policy on a 10 ms instance: of the four arrivals in the first 5 ms (the
        // warm-up) one runs, one waits and two are refused; the two after it are served.
        let one = Box::new(DynamicBatching::new(DynamicBatchingConfig {
            max_batch_tokens: 1 << 30,
            max_queue: 1,
            ..Default::default()
        }));
        let r = simulate(
            one,
            &[UnitSpec::batch(RuntimeSpec::dynamic(512, 1))],
            &flat(10.0),
            at(&[0.0, 1.0, 2.0, 3.0, 30.0, 50.0]),
            &SimOptions { warmup: 5_000_000, slo: Some(100_000_000), ..SimOptions::default() },
        );
        let warm = r.warmup.as_ref().expect("a warm-up window");
        assert_eq!((warm.requests, warm.completed, warm.dropped), (4, 2, 2), "{warm:?}");
        assert_eq!(warm.dropped_by.get("queue full"), Some(&2));
        assert_eq!(warm.slo_attainment, 0.5);
        assert_eq!((r.measured.requests, r.measured.completed, r.measured.dropped), (2, 2, 0));
        let lost: usize = r.timeline.iter().map(|i| i.lost).sum();
        assert_eq!(lost, 2, "the timeline from t = 0 shows the drops too");
    }

    #[test]
    fn dynamic_batching_batches_what_waited() {
        // Batch of up to 4: the first runs alone; the next three wait and run together.
        let r = simulate(
            fifo(),
            &[UnitSpec::batch(RuntimeSpec::dynamic(512, 4))],
            &flat(10.0),
            at(&[0.0, 1.0, 2.0, 3.0]),
            &each(None),
        );
        assert_eq!(latencies(&r), vec![10.0, 19.0, 18.0, 17.0]);
    }
}
