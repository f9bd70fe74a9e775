//! The live driver's state, a plain struct (no locks, no tasks): the [`Ledger`] with the
//! policy, the jobs it places (their inputs and reply channels), the instances, and the outputs
//! of finished batches until the ledger says where they go. Every method takes `now` and
//! returns the [`Outside`] work to start once the caller has released its lock.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use morph_core::{
    Computed, DropReason, Effect, Generation, HostId, InstanceId, Launched, Ledger, NewRequest, OnViolation,
    Outcome, Policy, RequestId, ServiceClass, StartKind, TaskId, Ticket, Time, TokenPlan, UnitKind, UnitSpec,
};
use morph_decoder::{Decoding, GenEvent, GenRequest, IterationReport};
use morph_engine::{EngineError, EngineHandle, Ran, Rows};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use tokio::sync::oneshot;

use super::CallRefused;
use super::job::{Input, Job, Pooled, SeqError, SeqResult};
use super::to_decoder::{Held, ToDecoder};
use crate::launcher::{Instance, InstanceEngine};
use crate::metrics::{CancelKind, Metrics};

/// Work the state leaves to its caller, to do outside the lock.
#[derive(Debug)]
pub(crate) enum Outside {
    /// Run this batch on the engine thread, then report it with [`State::batch_done`].
    /// `longest`: the batch's longest sequence in tokens (hidden rows included).
    Run {
        instance: InstanceId,
        handle: EngineHandle,
        requests: Vec<RequestId>,
        rows: Rows,
        plan: TokenPlan,
        longest: u32,
        /// The spans of the calls whose sequences it runs.
        calls: Vec<tracing::Span>,
    },
    /// Start an instance of `unit`, then report it with [`State::launched`].
    Launch { ticket: Ticket, unit: UnitSpec, host: Option<HostId> },
    /// Retire this instance (stop it, joining its thread), or, when `park`, hand it to the
    /// launcher, which may keep it loaded for a hot start.
    Retire { instance: Box<Instance>, park: bool },
    /// Load `unit` on `host` ahead of a launch ([`crate::launcher::Launcher::preload`]).
    Preload { unit: UnitSpec, host: HostId },
}

#[derive(Debug)]
pub(crate) struct State {
    ledger: Ledger,
    jobs: HashMap<RequestId, Job>,
    instances: HashMap<InstanceId, Instance>,
    /// Finished encoder batches' outputs, until their `Answer` or `Forward`.
    outputs: HashMap<RequestId, Result<Vec<f32>, EngineError>>,
    /// When each pending launch was asked for.
    launches: HashMap<Ticket, Instant>,
    /// Instances whose worker is gone, until the ledger retires them (never parked).
    lost: HashSet<InstanceId>,
    /// While a call's generations are admitted, what their decoders are told, until the call
    /// is admitted or refused ([`State::generate_call`]).
    held: Option<Held>,
    metrics: Arc<Metrics>,
}

impl State {
    pub(crate) fn new(policy: Box<dyn Policy>, metrics: Arc<Metrics>) -> Self {
        Self {
            ledger: Ledger::new(policy, OnViolation::Refuse),
            jobs: HashMap::new(),
            instances: HashMap::new(),
            outputs: HashMap::new(),
            launches: HashMap::new(),
            lost: HashSet::new(),
            held: None,
            metrics,
        }
    }

    pub(crate) fn policy(&self) -> &dyn Policy {
        self.ledger.policy()
    }

    pub(crate) fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    pub(crate) fn instances_mut(&mut self) -> impl Iterator<Item = (&InstanceId, &mut Instance)> {
        self.instances.iter_mut()
    }

    /// Takes every instance out, for the caller to stop them (at shutdown).
    pub(crate) fn take_instances(&mut self) -> Vec<Instance> {
        self.instances.drain().map(|(_, w)| w).collect()
    }

    /// An instance of the initial layout, loaded and idle.
    pub(crate) fn add_instance(&mut self, now: Time, instance: Instance) -> (InstanceId, Vec<Outside>) {
        let mut effects = Vec::new();
        let (unit, host) = (instance.unit, instance.host);
        let id = self.ledger.add_instance(now, unit, host, &mut effects);
        self.instances.insert(id, instance);
        (id, self.apply(effects))
    }

    /// Admits one tokenized encoder sequence (of a service class, for policies that weigh
    /// them); the receiver yields its vector or why not.
    pub(crate) fn submit(
        &mut self,
        now: Time,
        ids: Vec<u32>,
        service: Option<ServiceClass>,
    ) -> (RequestId, oneshot::Receiver<SeqResult>, Vec<Outside>) {
        let (reply, rx) = oneshot::channel();
        let new = NewRequest { input_len: ids.len() as u32, generation: None, service };
        let job = Job::Embed {
            input: Input::Tokens(ids),
            reply,
            enqueued: Instant::now(),
            plan: TokenPlan::Plain,
            span: tracing::Span::current(),
        };
        let (id, outside) = self.admit(now, new, |_| job);
        (id, rx, outside)
    }

    /// Admits a call's encoder sequences whole, or none of them: when the policy gives up on
    /// one at admission (a full queue, an input too long), those already admitted are withdrawn
    /// before any of their batches starts, and the call gets that reason.
    #[allow(clippy::type_complexity)]
    pub(crate) fn submit_call(
        &mut self,
        now: Time,
        inputs: Vec<Vec<u32>>,
        service: Option<ServiceClass>,
    ) -> (Result<Vec<(RequestId, oneshot::Receiver<SeqResult>)>, DropReason>, Vec<Outside>) {
        let mut admitted = Vec::with_capacity(inputs.len());
        let mut outside = Vec::new();
        for ids in inputs {
            let (id, mut rx, more) = self.submit(now, ids, service);
            outside.extend(more);
            if let Ok(Err(SeqError::Dropped(reason))) = rx.try_recv() {
                let withdrawn: Vec<RequestId> = admitted.iter().map(|(id, _)| *id).collect();
                for &id in &withdrawn {
                    outside.extend(self.withdraw(now, id));
                }
                return (Err(reason), self.skip_withdrawn(now, outside, &withdrawn));
            }
            admitted.push((id, rx));
        }
        (Ok(admitted), outside)
    }

    /// Batches left to run that hold only withdrawn requests end at once without running.
    fn skip_withdrawn(&mut self, now: Time, outside: Vec<Outside>, withdrawn: &[RequestId]) -> Vec<Outside> {
        let mut kept = Vec::with_capacity(outside.len());
        let mut pending = outside;
        while let Some(work) = pending.pop() {
            match work {
                Outside::Run { instance, requests, .. } if requests.iter().all(|r| withdrawn.contains(r)) => {
                    pending.extend(self.batch_ended(now, instance, false, None));
                }
                other => kept.push(other),
            }
        }
        kept
    }

    /// Admits one generation; the receiver streams its tokens, then `Done`, or says why not.
    pub(crate) fn generate(
        &mut self,
        now: Time,
        prompt: Vec<u32>,
        generation: Generation,
        decoding: Decoding,
    ) -> (RequestId, UnboundedReceiver<GenEvent>, Vec<Outside>) {
        let (events, rx) = unbounded_channel();
        let new = NewRequest { input_len: prompt.len() as u32, generation: Some(generation), service: None };
        let max_tokens = generation.max_tokens;
        let (id, outside) = self.admit(now, new, |id| {
            let request = GenRequest { key: id.0, prompt, max_tokens, decoding, events };
            Job::Generate { request: Some(request), enqueued: Instant::now() }
        });
        (id, rx, outside)
    }

    /// Admits a call's generations together: all of them, or none and the call's refusal or
    /// failure (the first event of the one the policy did not take). Their decoders hear of
    /// them only once that is decided, steps last, so a refused call's admitted generations
    /// leave before any step computes them.
    #[allow(clippy::type_complexity)]
    pub(crate) fn generate_call(
        &mut self,
        now: Time,
        choices: Vec<(Vec<u32>, Generation, Decoding)>,
    ) -> (Result<Vec<(RequestId, UnboundedReceiver<GenEvent>)>, CallRefused>, Vec<Outside>) {
        let (idle, count) = (self.jobs.is_empty(), choices.len());
        self.held = Some(Held::default());
        let (mut admitted, mut outside, mut refused) = (Vec::with_capacity(choices.len()), Vec::new(), None);
        for (prompt, generation, decoding) in choices {
            let (id, mut events, more) = self.generate(now, prompt, generation, decoding);
            outside.extend(more);
            // Answered already: refused or failed by the policy as it arrived.
            if !self.jobs.contains_key(&id) {
                refused = Some(events.try_recv().unwrap_or(GenEvent::Failed(EngineError::Stopped)));
                break;
            }
            admitted.push((id, events));
        }
        if refused.is_some() {
            for (id, _) in &admitted {
                outside.extend(self.withdraw(now, *id));
            }
        }
        for (instance, command) in self.held.take().unwrap_or_default().in_sending_order() {
            self.send_to_decoder(instance, command);
        }
        match refused {
            Some(GenEvent::Dropped(DropReason::QueueFull { capacity }))
                if self.never_holds(count, capacity, idle) =>
            {
                let holds = if idle { admitted.len() } else { capacity + self.decoder_rows() };
                (Err(CallRefused::NeverFits { choices: count, holds }), outside)
            }
            Some(event) => (Err(CallRefused::Choice(event)), outside),
            None => (Ok(admitted), outside),
        }
    }

    /// Whether a call of `choices` that found the queue (of `capacity`) full could never be
    /// admitted, so that no retry helps: it was refused on an idle server, or it is larger than
    /// the queue and every decoder's batch together. Only while every instance is up (one
    /// lost or starting would hold more once back).
    fn never_holds(&self, choices: usize, capacity: usize, idle: bool) -> bool {
        let settled = self.lost.is_empty() && self.launches.is_empty();
        settled && (idle || choices > capacity + self.decoder_rows())
    }

    /// The sequences every decoder instance's batch holds.
    fn decoder_rows(&self) -> usize {
        let decoders = self.instances.values().filter(|i| matches!(i.engine, InstanceEngine::Decoder { .. }));
        decoders.map(|i| i.unit.runtime.max_batch as usize).sum()
    }

    /// The ledger admits the request (and the policy hears of it) before its job exists, so the
    /// job is filed before the policy's actions are carried out.
    fn admit(
        &mut self,
        now: Time,
        new: NewRequest,
        job: impl FnOnce(RequestId) -> Job,
    ) -> (RequestId, Vec<Outside>) {
        let mut effects = Vec::new();
        let id = self.ledger.arrive(now, new, &mut effects);
        self.jobs.insert(id, job(id));
        (id, self.apply(effects))
    }

    /// The encoder batch on `instance` (these requests, in order) returned `result`.
    pub(crate) fn batch_done(
        &mut self,
        now: Time,
        instance: InstanceId,
        requests: &[RequestId],
        result: Result<Ran, EngineError>,
    ) -> Vec<Outside> {
        let failed = result.is_err();
        let computed = match result {
            Ok(Ran { vectors, computed }) => {
                self.outputs.extend(requests.iter().copied().zip(vectors.into_iter().map(Ok)));
                Some(computed)
            }
            Err(e) => {
                self.outputs.extend(requests.iter().map(|r| (*r, Err(e.clone()))));
                None
            }
        };
        self.batch_ended(now, instance, failed, computed)
    }

    /// The batch on `instance` ended (see [`morph_core::Event::BatchDone`]).
    fn batch_ended(
        &mut self,
        now: Time,
        instance: InstanceId,
        failed: bool,
        computed: Option<Computed>,
    ) -> Vec<Outside> {
        let mut effects = Vec::new();
        self.ledger.batch_done(now, instance, failed, computed, &mut effects);
        self.apply(effects)
    }

    /// What runs `instance` is gone (`error` says how): the instance leaves; of the batch
    /// it ran (these requests), those lost for the first time wait to run again, the others
    /// are answered with the error.
    pub(crate) fn lost(
        &mut self,
        now: Time,
        instance: InstanceId,
        requests: &[RequestId],
        error: EngineError,
    ) -> Vec<Outside> {
        self.outputs.extend(requests.iter().map(|r| (*r, Err(error.clone()))));
        self.lost.insert(instance);
        let mut effects = Vec::new();
        self.ledger.instance_lost(now, instance, &mut effects);
        let outside = self.apply(effects);
        for r in requests.iter().filter(|r| self.ledger.place(**r).is_some()) {
            self.outputs.remove(r);
        }
        outside
    }

    /// The host `instance` runs on.
    pub(crate) fn host_of(&self, instance: InstanceId) -> Option<HostId> {
        self.instances.get(&instance).map(|w| w.host)
    }

    /// Every idle instance on `server` is lost (its host is dead); busy ones fail their batch
    /// on their own.
    pub(crate) fn lose_idle_on(&mut self, now: Time, host: HostId) -> Vec<Outside> {
        let why = format!("its host (host {host}) is dead");
        self.lose_idle(now, |w| w.host == host, &why)
    }

    /// The worker process `pid` on `host` is gone from the registry: if its instance is idle,
    /// it is lost now (a busy one fails its batch on the cut connection and is lost then).
    /// Nothing happens (no effects) if no idle instance has that worker.
    pub(crate) fn worker_gone(&mut self, now: Time, host: HostId, pid: u32) -> Vec<Outside> {
        let ours = |w: &Instance| w.host == host && w.start.as_ref().is_some_and(|s| s.pid == pid);
        self.lose_idle(now, ours, &format!("worker process {pid}'s registration is gone"))
    }

    /// The worker processes of the instances up: (host, pid).
    pub(crate) fn worker_pids(&self) -> Vec<(HostId, u32)> {
        self.instances.values().filter_map(|w| Some((w.host, w.start.as_ref()?.pid))).collect()
    }

    /// The idle instances whose worker is `which` are lost now, for `why`.
    fn lose_idle(&mut self, now: Time, which: impl Fn(&Instance) -> bool, why: &str) -> Vec<Outside> {
        let idle: Vec<InstanceId> = self
            .instances
            .iter()
            .filter(|(id, w)| which(w) && self.ledger.is_idle(**id))
            .map(|(id, _)| *id)
            .collect();
        let mut outside = Vec::new();
        for id in idle {
            outside.extend(self.lost(now, id, &[], EngineError::Lost(why.to_string())));
        }
        outside
    }

    /// A decoder thread's iteration report.
    pub(crate) fn iteration(
        &mut self,
        now: Time,
        instance: InstanceId,
        report: IterationReport,
    ) -> Vec<Outside> {
        self.metrics.generated_tokens(report.produced);
        let left: Vec<RequestId> = report.left.into_iter().map(RequestId).collect();
        let mut effects = Vec::new();
        self.ledger.iteration_done(now, instance, &left, report.failed, &report.pending, &mut effects);
        self.apply(effects)
    }

    /// A host has `slots` device slots now.
    pub(crate) fn slots_changed(&mut self, now: Time, host: HostId, slots: u16) -> Vec<Outside> {
        let mut effects = Vec::new();
        self.ledger.slots_changed(now, host, slots, &mut effects);
        self.apply(effects)
    }

    /// A launch ended: its instance and how it started, or why it failed.
    pub(crate) fn launched(
        &mut self,
        now: Time,
        ticket: Ticket,
        result: Result<(Instance, StartKind), String>,
    ) -> (Option<InstanceId>, Vec<Outside>) {
        let took = self.launches.remove(&ticket).map_or(0, |t| t.elapsed().as_nanos() as u64);
        let mut effects = Vec::new();
        let (id, stray) = match result {
            Ok((instance, start)) => {
                self.metrics.started(start, std::time::Duration::from_nanos(took));
                let launched = Launched { ticket, host: instance.host, start, took };
                match self.ledger.launch_up(now, launched, &mut effects) {
                    Some(id) => {
                        self.instances.insert(id, instance);
                        (Some(id), None)
                    }
                    // No launch had that ticket: the instance has no place.
                    None => (None, Some(Outside::Retire { instance: Box::new(instance), park: true })),
                }
            }
            Err(e) => {
                self.ledger.launch_failed(now, ticket, e, &mut effects);
                (None, None)
            }
        };
        let mut outside = self.apply(effects);
        outside.extend(stray);
        (id, outside)
    }

    /// The caller of `request` went away.
    pub(crate) fn cancel(&mut self, now: Time, request: RequestId) -> Vec<Outside> {
        let kind = match self.ledger.place(request) {
            None => return Vec::new(),
            Some(morph_core::ledger::Place::Waiting { .. }) => CancelKind::Queued,
            Some(morph_core::ledger::Place::Running(i)) => match self.ledger.unit(i).map(|u| u.kind) {
                Some(UnitKind::Generation) => CancelKind::Stopped,
                _ => CancelKind::Discarded,
            },
        };
        self.metrics.cancelled(kind);
        self.withdraw(now, request)
    }

    /// Takes a request back (its caller left, or its call was refused whole).
    fn withdraw(&mut self, now: Time, request: RequestId) -> Vec<Outside> {
        let mut effects = Vec::new();
        self.ledger.cancel(now, request, &mut effects);
        self.apply(effects)
    }

    pub(crate) fn tick(&mut self, now: Time) -> Vec<Outside> {
        let mut effects = Vec::new();
        self.ledger.tick(now, &mut effects);
        self.apply(effects)
    }

    /// Carries out the ledger's effects that need no waiting; returns the rest.
    fn apply(&mut self, effects: Vec<Effect>) -> Vec<Outside> {
        let mut outside = Vec::new();
        for effect in effects {
            match effect {
                Effect::Run { instance, requests, plan } => {
                    outside.extend(self.start(instance, &requests, plan.tokens));
                }
                Effect::Join { instance, requests } => {
                    self.start(instance, &requests, TokenPlan::Plain);
                }
                Effect::Step { instance, plan } => self.tell_decoder(instance, ToDecoder::Step(plan)),
                Effect::Cancel { instance, request } => {
                    self.tell_decoder(instance, ToDecoder::Cancel(request.0))
                }
                Effect::Launch { ticket, unit, host } => {
                    self.launches.insert(ticket, Instant::now());
                    outside.push(Outside::Launch { ticket, unit, host });
                }
                Effect::Preload { unit, host } => outside.push(Outside::Preload { unit, host }),
                Effect::Retire { instance } => {
                    let park = !self.lost.remove(&instance);
                    let instance = self.instances.remove(&instance);
                    outside.extend(instance.map(|w| Outside::Retire { instance: Box::new(w), park }));
                }
                Effect::Answer { request, outcome } => self.answer(request, outcome),
                Effect::Forward { request, .. } => {
                    let output = self.outputs.remove(&request);
                    if let (Some(Job::Embed { input, .. }), Some(Ok(hidden))) =
                        (self.jobs.get_mut(&request), output)
                    {
                        *input = Input::Hidden(hidden);
                    }
                }
                Effect::Refused(violation) => {
                    tracing::error!(policy = self.ledger.policy().name(), %violation, "action refused");
                    self.metrics.refused();
                }
            }
        }
        self.metrics.set_queue_size(self.ledger.policy().queue_len());
        outside
    }

    /// Hands a batch to its instance: an encoder batch to run outside the lock, or generations
    /// to a decoder thread's batch (static or continuous alike; the ledger keeps them apart).
    fn start(&mut self, instance: InstanceId, requests: &[RequestId], plan: TokenPlan) -> Option<Outside> {
        let started = Instant::now();
        match self.instances.get(&instance).map(|w| &w.engine) {
            Some(InstanceEngine::Encoder(engine)) => {
                let mut calls = Vec::with_capacity(requests.len());
                let mut tokens = Vec::new();
                let mut hidden = Vec::new();
                for r in requests {
                    let Some(Job::Embed { input, enqueued, plan: ran, span, .. }) = self.jobs.get_mut(r)
                    else {
                        continue;
                    };
                    self.metrics.queued((started - *enqueued).as_secs_f64());
                    *ran = plan;
                    calls.push(span.clone());
                    // A copy: the job keeps its input until the batch ends, to run it again if
                    // what runs it is lost.
                    match input {
                        Input::Tokens(ids) => tokens.push(ids.clone()),
                        Input::Hidden(h) => hidden.push(h.clone()),
                    }
                }
                // Rows that all name a task go tagged with it: a prompt plan takes each row's
                // task's prompts.
                let tasks: Option<Vec<TaskId>> = requests
                    .iter()
                    .map(|r| self.ledger.request(*r).and_then(|i| i.service).map(|s| s.task))
                    .collect();
                let rows = match (hidden.is_empty(), tasks) {
                    (false, _) => Rows::Hidden(hidden),
                    (true, Some(tasks)) if tasks.len() == tokens.len() => Rows::Tasked(tokens, tasks),
                    (true, _) => Rows::Tokens(tokens),
                };
                let longest =
                    requests.iter().filter_map(|r| self.ledger.request(*r)).map(|i| i.input_len).max();
                let requests = requests.to_vec();
                let longest = longest.unwrap_or(0);
                Some(Outside::Run { instance, handle: engine.handle(), requests, rows, plan, longest, calls })
            }
            Some(InstanceEngine::Decoder { .. }) => {
                let mut generations = Vec::with_capacity(requests.len());
                for r in requests {
                    if let Some(Job::Generate { request, enqueued }) = self.jobs.get_mut(r)
                        && let Some(g) = request.take()
                    {
                        self.metrics.queued((started - *enqueued).as_secs_f64());
                        generations.push(g);
                    }
                }
                self.tell_decoder(instance, ToDecoder::Join(generations));
                None
            }
            None => None,
        }
    }

    /// Tells decoder `instance` `command`, or holds it while a call is admitted.
    fn tell_decoder(&mut self, instance: InstanceId, command: ToDecoder) {
        match &mut self.held {
            Some(held) => held.push(instance, command),
            None => self.send_to_decoder(instance, command),
        }
    }

    fn send_to_decoder(&self, instance: InstanceId, command: ToDecoder) {
        if let Some(InstanceEngine::Decoder { thread, .. }) = self.instances.get(&instance).map(|w| &w.engine)
            && let Err(e) = command.send(thread)
        {
            tracing::error!(%instance, error = %e, "decoder instance stopped");
        }
    }

    /// The request is over: its caller gets its output, its error, or (gone) nothing.
    fn answer(&mut self, request: RequestId, outcome: Outcome) {
        let output = self.outputs.remove(&request);
        let Some(job) = self.jobs.remove(&request) else { return };
        match (outcome, job) {
            (Outcome::Done | Outcome::Failed, Job::Embed { reply, plan, .. }) => {
                let result = output.unwrap_or(Err(EngineError::Stopped)).map_err(SeqError::Engine);
                let result = result.map(|vector| Pooled { vector, plan });
                let _ = reply.send(result);
            }
            // A generation was answered by its decoder thread; a cancelled request has no one
            // to answer.
            (Outcome::Done | Outcome::Failed | Outcome::Cancelled, _) => {}
            (Outcome::Dropped(reason), job) => job.fail(SeqError::Dropped(reason)),
            (Outcome::PolicyError, job) => {
                job.fail(SeqError::Engine(EngineError::Inference(
                    "the scheduler broke a rule with this request".into(),
                )));
            }
        }
    }
}
