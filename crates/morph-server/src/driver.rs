//! The live driver: the policy behind a lock, told about arrivals and finished batches in real
//! time, with its actions applied to engine workers. Sequences wait here (id → reply channel)
//! while the policy decides; a `Run` action hands them to an instance's worker, `Launch` starts
//! a worker through the [`Launcher`] off the async threads, `Retire` stops one.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use morph_core::{
    Action, Event, InstanceId, InstanceInfo, Policy, RejectReason, RequestId, RequestInfo, RuntimeSpec, Time,
};
use morph_engine::{EngineError, EngineWorker};
use tokio::sync::oneshot;

use crate::launcher::Launcher;
use crate::metrics::Metrics;

/// What a sequence's caller gets back.
pub type SeqResult = Result<Vec<f32>, SeqError>;

#[derive(Debug, Clone, PartialEq)]
pub enum SeqError {
    Rejected(RejectReason),
    Engine(EngineError),
}

struct Waiting {
    ids: Vec<u32>,
    enqueued: Instant,
    reply: oneshot::Sender<SeqResult>,
}

struct State {
    policy: Box<dyn Policy>,
    waiting: HashMap<RequestId, Waiting>,
    next_id: u64,
    instances: HashMap<InstanceId, EngineWorker>,
    next_instance: u32,
}

/// What the policy's actions leave to do outside the lock.
#[derive(Default)]
struct Effects {
    runs: Vec<(InstanceId, Vec<Waiting>)>,
    launches: Vec<RuntimeSpec>,
    retired: Vec<EngineWorker>,
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
        workers: Vec<EngineWorker>,
        launcher: Arc<Launcher>,
        metrics: Arc<Metrics>,
    ) -> Arc<Self> {
        let epoch = Instant::now();
        let mut instances = HashMap::new();
        let mut actions = Vec::new();
        for (i, worker) in workers.into_iter().enumerate() {
            let id = InstanceId(i as u32);
            let runtime = worker.handle().runtime();
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
            let runtime = worker.handle().runtime();
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
    pub fn take_workers(&self) -> Vec<EngineWorker> {
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
            state.waiting.insert(id, Waiting { ids, enqueued: Instant::now(), reply });
            self.decide(&mut state, Event::Arrival(info))
        };
        self.apply(effects);
        rx
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
                        let _ = w.reply.send(Err(SeqError::Rejected(reason)));
                    }
                }
                Action::Run { instance, requests } => {
                    let batch = requests.iter().filter_map(|r| state.waiting.remove(r)).collect();
                    effects.runs.push((instance, batch));
                }
                Action::Join { requests, .. } => {
                    // Live instances are encoders: they run batches as a unit.
                    for w in requests.iter().filter_map(|r| state.waiting.remove(r)) {
                        let detail = "continuous batching needs a decoder instance".to_string();
                        let _ = w.reply.send(Err(SeqError::Engine(EngineError::Inference(detail))));
                    }
                }
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
                self.decide(&mut state, Event::InstanceUp(InstanceInfo { id, runtime }))
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
        let Some(handle) = self.lock().instances.get(&instance).map(EngineWorker::handle) else {
            for w in batch {
                let _ = w.reply.send(Err(SeqError::Engine(EngineError::Stopped)));
            }
            return;
        };
        let longest = batch.iter().map(|w| w.ids.len()).max().unwrap_or(0) as u32;
        let shape = handle.runtime().padded_shape(longest, batch.len() as u32);
        self.metrics.batch_size.observe(batch.len() as f64);
        self.metrics.batch_padded_tokens.observe(shape.tokens() as f64);
        let mut inputs = Vec::with_capacity(batch.len());
        let mut replies = Vec::with_capacity(batch.len());
        for w in batch {
            self.metrics.queue_seconds.observe((started - w.enqueued).as_secs_f64());
            inputs.push(w.ids);
            replies.push(w.reply);
        }
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
