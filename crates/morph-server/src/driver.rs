//! The live driver: the policy behind a lock, told about arrivals and finished batches in real
//! time, with its actions applied to workers. Sequences wait here (id → reply channel) while the
//! policy decides; a `Run` action hands them to an instance's worker (an encoder batch, or a
//! static batch of generations), `Join` adds generations to a decoder's continuous batch,
//! `Launch` starts a worker through the [`Launcher`] off the async threads, `Retire` stops one.
//! A decoder's iteration reports come back through a channel per instance and reach the policy
//! as `SequencesDone` (and `BatchDone` when its batch empties).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use morph_core::{
    Action, Event, Generation, InstanceId, InstanceInfo, Policy, RejectReason, RequestId, RequestInfo,
    RuntimeSpec, Time,
};
use morph_engine::EngineError;
use morph_engine::decoder::{GenEvent, GenRequest, Iterations, SamplingParams};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use tokio::sync::oneshot;

use crate::launcher::{Launcher, Worker};
use crate::metrics::Metrics;

/// What a sequence's caller gets back.
pub type SeqResult = Result<Vec<f32>, SeqError>;

#[derive(Debug, Clone, PartialEq)]
pub enum SeqError {
    Rejected(RejectReason),
    Engine(EngineError),
}

/// A sequence waiting for the policy: an input to embed, or a generation.
enum Job {
    Embed { ids: Vec<u32>, reply: oneshot::Sender<SeqResult> },
    Generate(GenRequest),
}

impl Job {
    /// Answers a job that cannot run.
    fn fail(self, error: SeqError) {
        match (self, error) {
            (Job::Embed { reply, .. }, e) => {
                let _ = reply.send(Err(e));
            }
            (Job::Generate(g), SeqError::Rejected(reason)) => {
                let _ = g.events.send(GenEvent::Rejected(reason));
            }
            (Job::Generate(g), SeqError::Engine(e)) => {
                let _ = g.events.send(GenEvent::Failed(e));
            }
        }
    }
}

struct Waiting {
    job: Job,
    enqueued: Instant,
}

struct State {
    policy: Box<dyn Policy>,
    waiting: HashMap<RequestId, Waiting>,
    next_id: u64,
    instances: HashMap<InstanceId, Worker>,
    next_instance: u32,
}

/// What the policy's actions leave to do outside the lock.
#[derive(Default)]
struct Effects {
    runs: Vec<(InstanceId, Vec<Waiting>)>,
    launches: Vec<RuntimeSpec>,
    retired: Vec<Worker>,
}

fn mismatch(what: &str) -> SeqError {
    SeqError::Engine(EngineError::Inference(format!("{what} cannot run on this instance")))
}

/// Shared by every HTTP handler and batch task.
pub struct Driver {
    state: Mutex<State>,
    launcher: Arc<Launcher>,
    epoch: Instant,
    pub metrics: Arc<Metrics>,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver").field("instances", &self.lock().instances.len()).finish_non_exhaustive()
    }
}

impl Driver {
    /// Registers every instance with the policy (all are loaded and idle).
    pub fn new(
        mut policy: Box<dyn Policy>,
        workers: Vec<Worker>,
        launcher: Arc<Launcher>,
        metrics: Arc<Metrics>,
    ) -> Arc<Self> {
        let epoch = Instant::now();
        let mut instances = HashMap::new();
        let mut actions = Vec::new();
        for (i, worker) in workers.into_iter().enumerate() {
            let id = InstanceId(i as u32);
            let runtime = worker.runtime();
            policy.on_event(Time::ZERO, Event::InstanceUp(InstanceInfo { id, runtime }), &mut actions);
            instances.insert(id, worker);
        }
        debug_assert!(actions.is_empty(), "no requests yet, so nothing to do");
        let next_instance = instances.len() as u32;
        let state = State { policy, waiting: HashMap::new(), next_id: 0, instances, next_instance };
        Arc::new(Self { state: Mutex::new(state), launcher, epoch, metrics })
    }

    /// Instances per runtime, now.
    pub fn instance_counts(&self) -> Vec<(RuntimeSpec, usize)> {
        let mut counts: Vec<(RuntimeSpec, usize)> = Vec::new();
        for worker in self.lock().instances.values() {
            let runtime = worker.runtime();
            match counts.iter_mut().find(|(r, _)| *r == runtime) {
                Some((_, n)) => *n += 1,
                None => counts.push((runtime, 1)),
            }
        }
        counts.sort_by_key(|(r, _)| (r.max_len, r.max_batch));
        counts
    }

    pub fn policy_gauges(&self) -> Vec<(String, f64)> {
        self.lock().policy.gauges()
    }

    /// Takes every worker out, for the caller to stop them (at shutdown).
    pub fn take_workers(&self) -> Vec<Worker> {
        self.lock().instances.drain().map(|(_, w)| w).collect()
    }

    fn now(&self) -> Time {
        Time(self.epoch.elapsed().as_nanos() as u64)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn policy_description(&self) -> serde_json::Value {
        self.lock().policy.describe()
    }

    pub fn tick_interval(&self) -> Option<u64> {
        self.lock().policy.tick_interval()
    }

    /// Hands one tokenized sequence to the policy; the receiver yields its vector or why not.
    pub fn submit(self: &Arc<Self>, ids: Vec<u32>) -> oneshot::Receiver<SeqResult> {
        let (reply, rx) = oneshot::channel();
        let effects = {
            let mut state = self.lock();
            let id = RequestId(state.next_id);
            state.next_id += 1;
            let info = RequestInfo { id, input_len: ids.len() as u32, arrival: self.now(), generation: None };
            state.waiting.insert(id, Waiting { job: Job::Embed { ids, reply }, enqueued: Instant::now() });
            self.decide(&mut state, Event::Arrival(info))
        };
        self.apply(effects);
        rx
    }

    /// Hands one generation (its prompt's token ids, its predicted output length if known) to
    /// the policy; the receiver streams its tokens, then `Done`, or says why it failed or was
    /// refused.
    pub fn generate(
        self: &Arc<Self>,
        prompt: Vec<u32>,
        max_tokens: u32,
        predicted: Option<u32>,
        sampling: SamplingParams,
    ) -> UnboundedReceiver<GenEvent> {
        let (events, rx) = unbounded_channel();
        let effects = {
            let mut state = self.lock();
            let id = RequestId(state.next_id);
            state.next_id += 1;
            let generation = Some(Generation { max_tokens, predicted });
            let info = RequestInfo { id, input_len: prompt.len() as u32, arrival: self.now(), generation };
            let request = GenRequest { key: id.0, prompt, max_tokens, sampling, events };
            state.waiting.insert(id, Waiting { job: Job::Generate(request), enqueued: Instant::now() });
            self.decide(&mut state, Event::Arrival(info))
        };
        self.apply(effects);
        rx
    }

    /// Forwards every decoder instance's iteration reports to the policy, on tokio tasks. Call
    /// from within the runtime (the server's start, and after each launch).
    pub fn forward_iterations(self: &Arc<Self>) {
        let pending: Vec<(InstanceId, Iterations)> = self
            .lock()
            .instances
            .iter_mut()
            .filter_map(|(id, w)| match w {
                Worker::Decoder(d) => d.iterations.take().map(|rx| (*id, rx)),
                Worker::Encoder(_) => None,
            })
            .collect();
        for (instance, mut rx) in pending {
            let driver = Arc::clone(self);
            tokio::spawn(async move {
                while let Some((finished, empty)) = rx.recv().await {
                    let requests = finished.into_iter().map(RequestId).collect();
                    driver.on_event(Event::SequencesDone { instance, requests });
                    if empty {
                        driver.on_event(Event::BatchDone { instance });
                    }
                }
            });
        }
    }

    /// Hands generations to a decoder instance's continuous batch, under the lock.
    fn join_decoder(&self, state: &mut State, instance: InstanceId, requests: &[RequestId]) {
        let jobs: Vec<Waiting> = requests.iter().filter_map(|r| state.waiting.remove(r)).collect();
        let Some(Worker::Decoder(decoder)) = state.instances.get(&instance) else {
            jobs.into_iter().for_each(|w| w.job.fail(mismatch("a generation")));
            return;
        };
        let mut generations = Vec::with_capacity(jobs.len());
        for w in jobs {
            match w.job {
                Job::Generate(g) => {
                    self.metrics.queue_seconds.observe(w.enqueued.elapsed().as_secs_f64());
                    generations.push(g);
                }
                job @ Job::Embed { .. } => job.fail(mismatch("an embedding")),
            }
        }
        if let Err(e) = decoder.worker.join(generations) {
            tracing::error!(%instance, error = %e, "decoder instance stopped");
        }
    }

    pub fn tick(self: &Arc<Self>) {
        self.on_event(Event::Tick);
    }

    fn on_event(self: &Arc<Self>, event: Event) {
        let effects = self.decide(&mut self.lock(), event);
        self.apply(effects);
    }

    /// Tells the policy about `event` and applies its actions, under the one lock: rejections
    /// are answered and retired workers taken out at once; the rest is left for
    /// [`Driver::apply`].
    fn decide(&self, state: &mut State, event: Event) -> Effects {
        let mut actions = Vec::new();
        state.policy.on_event(self.now(), event, &mut actions);
        let mut effects = Effects::default();
        for action in actions {
            match action {
                Action::Reject { request, reason } => {
                    if let Some(w) = state.waiting.remove(&request) {
                        w.job.fail(SeqError::Rejected(reason));
                    }
                }
                Action::Run { instance, requests } => {
                    if let Some(Worker::Decoder(_)) = state.instances.get(&instance) {
                        // A static batch of generations: the policy adds none until BatchDone.
                        self.join_decoder(state, instance, &requests);
                    } else {
                        let batch = requests.iter().filter_map(|r| state.waiting.remove(r)).collect();
                        effects.runs.push((instance, batch));
                    }
                }
                Action::Join { instance, requests } => self.join_decoder(state, instance, &requests),
                Action::Launch { runtime } => effects.launches.push(runtime),
                Action::Retire { instance } => effects.retired.extend(state.instances.remove(&instance)),
            }
        }
        self.metrics.queue_size.store(state.policy.queue_len() as i64, Ordering::Relaxed);
        effects
    }

    /// Starts each batch on a tokio task that awaits the instance's engine worker, each launch
    /// on a blocking thread, and stops retired workers (joining their threads) off the async ones.
    fn apply(self: &Arc<Self>, effects: Effects) {
        for (instance, batch) in effects.runs {
            let driver = Arc::clone(self);
            tokio::spawn(async move { driver.run_batch(instance, batch).await });
        }
        for runtime in effects.launches {
            let driver = Arc::clone(self);
            tokio::task::spawn_blocking(move || driver.launch(runtime));
        }
        if !effects.retired.is_empty() {
            tokio::task::spawn_blocking(move || drop(effects.retired));
        }
    }

    /// Loads a new instance and tells the policy it is up (or that it failed).
    fn launch(self: Arc<Self>, runtime: RuntimeSpec) {
        let effects = match self.launcher.start(runtime) {
            Ok(worker) => {
                let mut state = self.lock();
                let id = InstanceId(state.next_instance);
                state.next_instance += 1;
                state.instances.insert(id, worker);
                tracing::info!(instance = %id, %runtime, "instance up");
                let effects = self.decide(&mut state, Event::InstanceUp(InstanceInfo { id, runtime }));
                drop(state);
                self.forward_iterations();
                effects
            }
            Err(e) => {
                tracing::error!(%runtime, error = %e, "launching an instance failed");
                self.decide(&mut self.lock(), Event::LaunchFailed { runtime })
            }
        };
        self.apply(effects);
    }

    async fn run_batch(self: Arc<Self>, instance: InstanceId, batch: Vec<Waiting>) {
        let started = Instant::now();
        let handle = match self.lock().instances.get(&instance) {
            Some(Worker::Encoder(worker)) => Some(worker.handle()),
            _ => None,
        };
        let Some(handle) = handle else {
            batch.into_iter().for_each(|w| w.job.fail(SeqError::Engine(EngineError::Stopped)));
            return;
        };
        let mut inputs = Vec::with_capacity(batch.len());
        let mut replies = Vec::with_capacity(batch.len());
        for w in batch {
            match w.job {
                Job::Embed { ids, reply } => {
                    self.metrics.queue_seconds.observe((started - w.enqueued).as_secs_f64());
                    inputs.push(ids);
                    replies.push(reply);
                }
                job @ Job::Generate(_) => job.fail(mismatch("a generation")),
            }
        }
        let longest = inputs.iter().map(Vec::len).max().unwrap_or(0) as u32;
        let shape = handle.runtime().padded_shape(longest, inputs.len() as u32);
        self.metrics.batch_size.observe(inputs.len() as f64);
        self.metrics.batch_padded_tokens.observe(shape.tokens() as f64);
        let result = if inputs.is_empty() { Ok(Vec::new()) } else { handle.embed(inputs).await };
        self.metrics.inference_seconds.observe(started.elapsed().as_secs_f64());
        match result {
            Ok(vectors) => {
                for (reply, v) in replies.into_iter().zip(vectors) {
                    let _ = reply.send(Ok(v));
                }
            }
            Err(e) => {
                for reply in replies {
                    let _ = reply.send(Err(SeqError::Engine(e.clone())));
                }
            }
        }
        self.on_event(Event::BatchDone { instance });
    }
}
