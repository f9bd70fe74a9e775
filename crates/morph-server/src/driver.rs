//! The live driver: the policy behind a lock, told about arrivals and finished batches in real
//! time, with its actions applied to engine workers. Sequences wait here (id → reply channel)
//! while the policy decides; a `Run` action hands them to an instance's worker.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use morph_core::{
    Action, Event, InstanceId, InstanceInfo, Policy, RejectReason, RequestId, RequestInfo, Time,
};
use morph_engine::{EngineError, EngineHandle};
use tokio::sync::oneshot;

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
}

/// Shared by every HTTP handler and batch task.
pub struct Driver {
    state: Mutex<State>,
    instances: HashMap<InstanceId, EngineHandle>,
    epoch: Instant,
    pub metrics: Arc<Metrics>,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver").field("instances", &self.instances.len()).finish_non_exhaustive()
    }
}

impl Driver {
    /// Registers every instance with the policy (all are loaded and idle).
    pub fn new(mut policy: Box<dyn Policy>, engines: Vec<EngineHandle>, metrics: Arc<Metrics>) -> Arc<Self> {
        let epoch = Instant::now();
        let mut instances = HashMap::new();
        let mut actions = Vec::new();
        for (i, handle) in engines.into_iter().enumerate() {
            let id = InstanceId(i as u32);
            policy.on_event(
                Time::ZERO,
                Event::InstanceUp(InstanceInfo { id, runtime: handle.runtime() }),
                &mut actions,
            );
            instances.insert(id, handle);
        }
        debug_assert!(actions.is_empty(), "no requests yet, so nothing to run");
        let state = State { policy, waiting: HashMap::new(), next_id: 0 };
        Arc::new(Self { state: Mutex::new(state), instances, epoch, metrics })
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
        let runs = {
            let mut state = self.lock();
            let id = RequestId(state.next_id);
            state.next_id += 1;
            let info = RequestInfo { id, input_len: ids.len() as u32, arrival: self.now() };
            state.waiting.insert(id, Waiting { ids, enqueued: Instant::now(), reply });
            self.decide(&mut state, Event::Arrival(info))
        };
        self.start(runs);
        rx
    }

    pub fn tick(self: &Arc<Self>) {
        self.on_event(Event::Tick);
    }

    fn on_event(self: &Arc<Self>, event: Event) {
        let runs = self.decide(&mut self.lock(), event);
        self.start(runs);
    }

    /// Tells the policy about `event` and applies its actions, under the one lock: rejections
    /// are answered at once, batches to run are returned for [`Driver::start`].
    fn decide(&self, state: &mut State, event: Event) -> Vec<(InstanceId, Vec<Waiting>)> {
        let mut actions = Vec::new();
        state.policy.on_event(self.now(), event, &mut actions);
        let mut runs = Vec::new();
        for action in actions {
            match action {
                Action::Reject { request, reason } => {
                    if let Some(w) = state.waiting.remove(&request) {
                        let _ = w.reply.send(Err(SeqError::Rejected(reason)));
                    }
                }
                Action::Run { instance, requests } => {
                    runs.push((instance, requests.iter().filter_map(|r| state.waiting.remove(r)).collect()));
                }
            }
        }
        self.metrics.queue_size.store(state.policy.queue_len() as i64, Ordering::Relaxed);
        runs
    }

    /// Starts each batch on a tokio task that awaits the instance's engine worker.
    fn start(self: &Arc<Self>, runs: Vec<(InstanceId, Vec<Waiting>)>) {
        for (instance, batch) in runs {
            let driver = Arc::clone(self);
            tokio::spawn(async move { driver.run_batch(instance, batch).await });
        }
    }

    async fn run_batch(self: Arc<Self>, instance: InstanceId, batch: Vec<Waiting>) {
        let started = Instant::now();
        let handle = &self.instances[&instance];
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
