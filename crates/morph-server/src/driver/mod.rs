//! The live driver: the [`State`] (ledger, policy, jobs, instances) behind one lock, told in real
//! time about arrivals, finished batches, decoder iterations, launches and clients that left.
//! What the state leaves to do outside the lock runs here: encoder batches on tokio tasks that
//! await the engine thread, launches on blocking threads, retired instances stopped off the async
//! threads. Each admitted request comes with a [`Claim`]: dropping it before the answer (the
//! HTTP client went away) cancels the request.

mod job;
mod state;
#[cfg(test)]
mod tests;
mod to_decoder;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use morph_core::{
    DropReason, Gauge, Generation, HostId, InstanceId, Nanos, Policy, RequestId, ServiceClass, StartKind,
    TaskId, Ticket, Time, TokenPlan, UnitSpec,
};
use morph_decoder::{Decoding, GenEvent, IterationReport};
use morph_engine::EngineError;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::oneshot;
use tracing::Instrument;

pub use job::{Pooled, SeqError, SeqResult};

/// Why a generation call's choices were not admitted.
#[derive(Debug)]
pub enum CallRefused {
    /// The first event of the choice the policy did not take (refused or failed).
    Choice(GenEvent),
    /// The queue was full on an idle server: it holds at most `holds` of the call's `choices`
    /// at once, so no retry of the call helps.
    NeverFits { choices: usize, holds: usize },
}
use state::{Outside, State};

use crate::launcher::{Instance, InstanceEngine, Launcher};
use crate::metrics::Metrics;

/// Shared by every HTTP handler and batch task.
pub struct Driver {
    state: Mutex<State>,
    /// Work asked for before the server ran, until [`Driver::begin`].
    pending: Mutex<Vec<Outside>>,
    launcher: Arc<Launcher>,
    epoch: Instant,
    pub metrics: Arc<Metrics>,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver").field("state", &*self.lock()).finish_non_exhaustive()
    }
}

/// What a call asks of every input it sends: its task, its deadline after arrival and what an
/// answer in time is worth (OTAS's service class, before it has an arrival time).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CallClass {
    pub task: TaskId,
    pub slo: Option<Nanos>,
    pub utility: f64,
}

impl CallClass {
    /// The service class of an input that arrived at `now`.
    fn at(self, now: Time) -> ServiceClass {
        ServiceClass {
            task: self.task,
            deadline: self.slo.map(|slo| now + slo),
            utility_micros: (self.utility * 1e6).round().clamp(0.0, f64::from(u32::MAX)) as u32,
        }
    }
}

/// A caller's hold on an admitted request: dropped before [`Claim::answered`], it cancels the
/// request (a queued one leaves the queue, a running generation stops, a running embedding is
/// discarded).
#[derive(Debug)]
pub struct Claim {
    driver: Arc<Driver>,
    request: RequestId,
    answered: bool,
}

impl Claim {
    pub fn request(&self) -> RequestId {
        self.request
    }

    /// The caller has its answer: nothing to cancel.
    pub fn answered(mut self) {
        self.answered = true;
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.answered {
            self.driver.cancel(self.request);
        }
    }
}

impl Driver {
    /// Registers every instance with the policy (all are loaded and idle).
    pub fn new(
        policy: Box<dyn Policy>,
        instances: Vec<Instance>,
        launcher: Arc<Launcher>,
        metrics: Arc<Metrics>,
    ) -> Arc<Self> {
        let mut state = State::new(policy, metrics.clone());
        let mut pending = Vec::new();
        for instance in instances {
            pending.extend(state.add_instance(Time::ZERO, instance).1);
        }
        let pending = Mutex::new(pending);
        Arc::new(Self { state: Mutex::new(state), pending, launcher, epoch: Instant::now(), metrics })
    }

    /// Starts what the policy asked for while the initial instances registered (launches, say).
    /// Call from within the runtime, once, when the server starts.
    pub fn begin(self: &Arc<Self>) {
        let pending = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()));
        self.carry_out(pending);
    }

    /// Instances per unit (runtime, stage, threads), now.
    pub fn instance_counts(&self) -> Vec<(UnitSpec, usize)> {
        let mut counts: Vec<(UnitSpec, usize)> = Vec::new();
        for (_, unit) in self.lock().ledger().instances() {
            match counts.iter_mut().find(|(u, _)| u == unit) {
                Some((_, n)) => *n += 1,
                None => counts.push((*unit, 1)),
            }
        }
        counts.sort_by_key(|(u, _)| (u.runtime.max_len, u.runtime.max_batch, u.stage_index()));
        counts
    }

    /// Whether a request could be served now: an instance is up at every stage of the model (a
    /// whole-model instance serves them all).
    pub fn can_serve(&self) -> bool {
        let state = self.lock();
        let units: Vec<UnitSpec> = state.ledger().instances().map(|(_, unit)| *unit).collect();
        match units.iter().find_map(|u| u.stage) {
            _ if units.iter().any(|u| u.stage.is_none()) => true,
            Some(stage) => (0..stage.count).all(|i| units.iter().any(|u| u.stage_index() == i)),
            None => false,
        }
    }

    /// Requests the policy holds waiting, now.
    pub fn queue_len(&self) -> usize {
        self.lock().policy().queue_len()
    }

    /// Why the policy would refuse any call now, before its tokens are known (see
    /// [`morph_core::Policy::refuses_any`]).
    pub fn refuses_any(&self) -> Option<DropReason> {
        self.lock().policy().refuses_any()
    }

    pub fn policy_gauges(&self) -> Vec<Gauge> {
        self.lock().policy().gauges()
    }

    pub fn policy_description(&self) -> serde_json::Value {
        self.lock().policy().describe()
    }

    pub fn tick_interval(&self) -> Option<u64> {
        self.lock().policy().tick_interval()
    }

    /// The instances running as worker processes and how each started.
    pub fn worker_starts(&self) -> Vec<(InstanceId, UnitSpec, HostId, crate::launcher::StartReport)> {
        let mut state = self.lock();
        let mut starts: Vec<_> = state
            .instances_mut()
            .filter_map(|(id, w)| w.start.clone().map(|s| (*id, w.unit, w.host, s)))
            .collect();
        starts.sort_by_key(|(id, ..)| *id);
        starts
    }

    pub fn launcher(&self) -> Arc<Launcher> {
        self.launcher.clone()
    }

    /// Takes every instance out, for the caller to stop them (at shutdown).
    pub fn take_instances(&self) -> Vec<Instance> {
        self.lock().take_instances()
    }

    fn now(&self) -> Time {
        Time(self.epoch.elapsed().as_nanos() as u64)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn claim(self: &Arc<Self>, request: RequestId) -> Claim {
        Claim { driver: Arc::clone(self), request, answered: false }
    }

    /// Hands one tokenized sequence to the policy; the receiver yields its vector or why not.
    pub fn submit(self: &Arc<Self>, ids: Vec<u32>) -> (Claim, oneshot::Receiver<SeqResult>) {
        let (id, rx, outside) = self.lock().submit(self.now(), ids, None);
        self.carry_out(outside);
        (self.claim(id), rx)
    }

    /// Hands a call's tokenized sequences to the policy together: all are admitted (each
    /// receiver yields its vector or why not), or none is and the call gets the reason.
    /// `class` is every sequence's, for policies that weigh them.
    #[allow(clippy::type_complexity)]
    pub fn submit_call(
        self: &Arc<Self>,
        inputs: Vec<Vec<u32>>,
        class: Option<CallClass>,
    ) -> Result<Vec<(Claim, oneshot::Receiver<SeqResult>)>, DropReason> {
        let now = self.now();
        let service = class.map(|c| c.at(now));
        let (admitted, outside) = self.lock().submit_call(now, inputs, service);
        self.carry_out(outside);
        Ok(admitted?.into_iter().map(|(id, rx)| (self.claim(id), rx)).collect())
    }

    /// Hands a call's generations (each its prompt's token ids, its cap and predicted output
    /// length, how it samples, where it stops and what it reports) to the policy together: all
    /// are admitted, each receiver streaming its tokens, then `Done`, or why it failed or was
    /// given up on; or none is, and the call gets why ([`CallRefused`]).
    #[allow(clippy::type_complexity)]
    pub fn generate_call(
        self: &Arc<Self>,
        choices: Vec<(Vec<u32>, Generation, Decoding)>,
    ) -> Result<Vec<(Claim, UnboundedReceiver<GenEvent>)>, CallRefused> {
        let (admitted, outside) = self.lock().generate_call(self.now(), choices);
        self.carry_out(outside);
        Ok(admitted?.into_iter().map(|(id, events)| (self.claim(id), events)).collect())
    }

    /// The caller of `request` went away.
    pub fn cancel(self: &Arc<Self>, request: RequestId) {
        let outside = self.lock().cancel(self.now(), request);
        self.carry_out(outside);
    }

    /// The host of `instance` if it runs on a cluster host whose agent no longer answers: the
    /// host is dead, not only this worker.
    async fn dead_host_of(self: Arc<Self>, instance: InstanceId) -> Option<HostId> {
        let host = self.lock().host_of(instance)?;
        let launcher = self.launcher.clone();
        let alive = tokio::task::spawn_blocking(move || launcher.host_alive(host)).await.ok()??;
        (!alive).then_some(host)
    }

    /// Tells the policy of hosts that joined, left or came back since the last call, and of
    /// idle instances whose worker process's registration went away (a busy one fails its batch).
    pub fn sync_hosts(self: &Arc<Self>) {
        for (host, slots) in self.launcher.slot_changes() {
            let outside = self.lock().slots_changed(self.now(), host, slots);
            self.carry_out(outside);
        }
        for (host, pid) in self.launcher.gone_workers() {
            let outside = self.lock().worker_gone(self.now(), host, pid);
            if !outside.is_empty() {
                tracing::error!(%host, pid, "worker lost: its registration is gone");
                self.metrics.worker_lost();
            }
            self.carry_out(outside);
        }
    }

    /// Idle instances whose worker process of this host exited (killed, crashed) are lost now,
    /// not at their next batch: readiness says so at once, and the policy replaces them.
    pub fn reap_exited_workers(self: &Arc<Self>) {
        let pids = self.lock().worker_pids();
        for (host, pid) in pids.into_iter().filter(|(_, pid)| !process_running(*pid)) {
            let outside = self.lock().worker_gone(self.now(), host, pid);
            if !outside.is_empty() {
                tracing::error!(pid, "worker lost: its process exited");
                self.metrics.worker_lost();
            }
            self.carry_out(outside);
        }
    }

    pub fn tick(self: &Arc<Self>) {
        let outside = self.lock().tick(self.now());
        self.carry_out(outside);
    }

    /// Takes every new decoder instance's step reports to the state, on a task of the server's
    /// runtime per instance: each report is told to the policy under the lock, and the step it
    /// answers with goes to the decoder thread's inbox (the thread never calls the server).
    /// Call from within the runtime (the server's start, and after each launch).
    pub fn forward_iterations(self: &Arc<Self>) {
        let untaken: Vec<(InstanceId, UnboundedReceiver<IterationReport>)> = self
            .lock()
            .instances_mut()
            .filter_map(|(id, w)| match &mut w.engine {
                InstanceEngine::Decoder { reports, .. } => Some((*id, reports.take()?)),
                _ => None,
            })
            .collect();
        for (instance, mut reports) in untaken {
            let driver = Arc::downgrade(self);
            tokio::spawn(async move {
                // Ends when the thread stops (its sender dropped), or the driver has gone.
                while let Some(report) = reports.recv().await {
                    let Some(driver) = driver.upgrade() else { return };
                    if report.sequences > 0 {
                        let r = &report;
                        driver.metrics.decode_iteration(r.sequences, r.prefilling, r.seconds, r.context);
                    }
                    let outside = driver.lock().iteration(driver.now(), instance, report);
                    driver.carry_out(outside);
                }
            });
        }
    }

    /// Starts what the state left to do: batches on tokio tasks, launches on blocking
    /// threads, retired instances stopped (joining their threads) off the async ones.
    fn carry_out(self: &Arc<Self>, outside: Vec<Outside>) {
        for work in outside {
            let driver = Arc::clone(self);
            match work {
                Outside::Run { instance, handle, requests, rows, plan, longest, calls } => {
                    let batch = batch_span(instance, requests.len(), plan, &calls);
                    let run = async move {
                        let started = Instant::now();
                        let count = requests.len();
                        let shape = handle.runtime().padded_shape(longest, count as u32);
                        let result = handle.run(rows, plan).await;
                        driver.metrics.batch(count, shape.tokens(), started.elapsed().as_secs_f64());
                        let outside = match result {
                            Err(EngineError::Lost(why)) => {
                                tracing::error!(%instance, %why, "worker lost; its batch fails");
                                driver.metrics.worker_lost();
                                let dead = driver.clone().dead_host_of(instance).await;
                                let mut state = driver.lock();
                                // The dead host's idle instances go first, so that the batch
                                // run again does not meet one of them.
                                let mut outside = match dead {
                                    Some(host) => state.lose_idle_on(driver.now(), host),
                                    None => Vec::new(),
                                };
                                let err = EngineError::Lost(why);
                                outside.extend(state.lost(driver.now(), instance, &requests, err));
                                outside
                            }
                            result => driver.lock().batch_done(driver.now(), instance, &requests, result),
                        };
                        driver.carry_out(outside);
                    };
                    tokio::spawn(run.instrument(batch));
                }
                Outside::Launch { ticket, unit, host } => {
                    tokio::task::spawn_blocking(move || driver.launch(ticket, unit, host));
                }
                Outside::Retire { instance, park: true } => {
                    tokio::task::spawn_blocking(move || drop(driver.launcher.retire(*instance)));
                }
                Outside::Retire { instance, park: false } => {
                    tokio::task::spawn_blocking(move || drop(instance));
                }
                Outside::Preload { unit, host } => {
                    tokio::task::spawn_blocking(move || {
                        if let Err(e) = driver.launcher.preload(unit, host) {
                            tracing::warn!(%unit, %host, error = %e, "preloading a unit failed");
                        }
                    });
                }
            }
        }
    }

    /// Loads a new instance on `server` and reports it: a thread is a warm start (the launcher
    /// keeps the weights in host memory), a worker process says how it started.
    fn launch(self: Arc<Self>, ticket: Ticket, unit: UnitSpec, host: Option<HostId>) {
        let result = self.launcher.start(unit, host).map_err(|e| e.to_string()).map(|instance| {
            let kind = instance.start.as_ref().map_or(StartKind::Warm, |s| s.kind);
            (instance, kind)
        });
        if let Err(e) = &result {
            tracing::error!(%unit, error = %e, "launching an instance failed");
            // A host found unreachable has lost its slots: the policy hears it before the failure.
            self.sync_hosts();
        }
        let (id, outside) = self.lock().launched(self.now(), ticket, result);
        if let Some(id) = id {
            tracing::info!(instance = %id, %unit, "instance up");
            self.forward_iterations();
        }
        self.carry_out(outside);
    }
}

/// Whether process `pid` runs: it is in the process table and not a zombie (exited, not yet
/// waited for by its parent).
fn process_running(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    // The state follows the command name, which is in parentheses and may hold spaces.
    !stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
}

/// The span of one encoder batch: a root of its own, linked to each call it serves, so that a
/// trace follows a call from its HTTP task into the batch that computed it. Not a child of the
/// current span: a batch is started from inside the task of the batch before it, and a child
/// keeps its parent alive in the subscriber, so every batch since start would stay chained to the
/// next (memory, and each log line's span context, growing with every batch served).
fn batch_span(
    instance: InstanceId,
    sequences: usize,
    plan: TokenPlan,
    calls: &[tracing::Span],
) -> tracing::Span {
    let batch = tracing::info_span!(parent: None, "batch", %instance, sequences, %plan);
    for call in calls {
        batch.follows_from(call);
    }
    batch
}
