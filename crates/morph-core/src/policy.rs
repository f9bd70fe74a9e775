//! The policy seam. A policy is a synchronous state machine: a driver (the live server or the
//! simulator) tells it what happened at time `now`, and it answers with [`Action`]s as data.
//! A policy never reads a clock, never blocks and never awaits. Both drivers apply actions
//! through the [`crate::ledger::Ledger`], so each action means the same in both:
//!
//! - **Encoder batches** ([`Action::Run`] on an encoder) run as a unit; [`Event::BatchDone`]
//!   names the requests that ran. With [`Then::Finish`] each is answered then; with
//!   [`Then::NextStage`] each waits, with the policy again, for the next stage of its pipeline
//!   (its activations stay with the driver), and the policy runs it on an instance of that stage.
//! - **Generations** run by iterations (one token of every running sequence per iteration).
//!   A *static* batch ([`Action::Run`] on a decoder) takes no newcomers; each generation is
//!   answered when its own output ends, and one [`Event::BatchDone`] naming them all comes when
//!   the last ends. A *continuous* batch ([`Action::Join`]) takes newcomers between iterations;
//!   every iteration's end is reported as [`Event::SequencesDone`] (maybe with none finished),
//!   with what each sequence left would feed next, and the next iteration is the step the policy
//!   answers with ([`Action::Step`]: which sequences compute in it, and how many prompt tokens
//!   each feeds). A batch the policy has just started on an idle instance waits for its first
//!   `Step` the same way. An emptied continuous batch is also reported as [`Event::BatchDone`]
//!   with no requests (each was already named in a `SequencesDone`).
//! - **Cancellation**: a client that goes away cancels its request. Waiting with the policy
//!   (queued, or between stages), it leaves at once and the policy gets [`Event::Cancelled`].
//!   In a continuous or static generation batch it stops at the next iteration's end, reported
//!   as finished there. In an encoder batch it runs to the batch's end and is discarded; if it
//!   was bound for a next stage the policy gets [`Event::Cancelled`] after the `BatchDone`.
//! - **Giving up**: [`Action::Drop`] answers a request waiting with the policy with an error
//!   that says why (a full queue, no runtime long enough, a deadline that can no longer be met).

use serde::{Deserialize, Serialize};

use crate::host::HostId;
use crate::instance::{InstanceId, InstanceInfo};
use crate::request::{RequestId, RequestInfo};
use crate::runtime::Computed;
use crate::step::{Pending, StepPlan};
use crate::time::{Nanos, Time};
use crate::token_plan::TokenPlan;
use crate::unit::{Launched, Ticket, UnitSpec};

/// Something that happened, reported by the driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// An instance is loaded and idle, ready for batches: one of the initial layout (`launch`
    /// is `None`), or one the policy asked for with [`Action::Launch`].
    InstanceUp { instance: InstanceInfo, launch: Option<Launched> },
    /// The launch with this ticket failed; no instance will come up for it.
    LaunchFailed { ticket: Ticket, unit: UnitSpec, reason: String },
    /// A request was admitted by the edge (validated and tokenized).
    Arrival(RequestInfo),
    /// The batch last started on `instance` ended and it is idle again. `requests` are the
    /// ones the [`Action::Run`] started (none for an emptied continuous batch); `failed`: the
    /// engine failed and they were answered with its error (none goes on to a next stage).
    /// `computed`: how long the engine computed the batch, where it measured that (its wall
    /// time less the time its thread waited for a core the host's other threads held), and the
    /// shape that work is priced at; `None`: the batch took the time between its start and this
    /// event, at its padded shape (the simulator's clock; and a batch whose callers all left
    /// before it ran, which took none).
    BatchDone { instance: InstanceId, requests: Vec<RequestId>, failed: bool, computed: Option<Computed> },
    /// The worker of `instance` is gone (it crashed, or stopped answering and was declared
    /// dead): the instance has left (the policy must not name it again). Of the batch it was
    /// running, `retried` are waiting again at that instance's stage (their first loss: the
    /// policy queues them again, first), and `failed` were answered with the error (lost a
    /// second time) or had been cancelled.
    InstanceLost { instance: InstanceId, retried: Vec<RequestId>, failed: Vec<RequestId> },
    /// An iteration of the continuous batch on `instance` ended and these generations in it
    /// finished (maybe none); their slots are free. `pending` is every generation left in the
    /// batch, in join order, with what its next step would feed: the next iteration is the
    /// [`Action::Step`] the policy answers with. Reported before the [`Event::BatchDone`] of an
    /// emptied batch.
    SequencesDone { instance: InstanceId, requests: Vec<RequestId>, pending: Vec<Pending> },
    /// A request the policy holds (queued, or between stages) was cancelled by its client and
    /// is gone: the policy must forget it.
    Cancelled { request: RequestId },
    /// Host `host` has `slots` device slots now: 0 when it left the deployment (its
    /// instances are reported lost as their workers fail), its slots again when it came back;
    /// a host numbered past those the policy knows joined after the start.
    SlotsChanged { host: HostId, slots: u16 },
    /// A periodic tick, every [`Policy::tick_interval`].
    Tick,
}

/// Why a policy gave up on a request. Drivers map it to their error (HTTP 429, 413, 504; a
/// dropped count).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
pub enum DropReason {
    #[error("queue is full ({capacity} sequences waiting); retry later")]
    QueueFull { capacity: usize },
    #[error("no instance accepts {len} tokens (longest runtime: {max_len})")]
    NoRuntimeFits { len: u32, max_len: u32 },
    #[error("its deadline ({} ms after arrival) can no longer be met", *.within as f64 / 1e6)]
    DeadlineUnreachable { within: Nanos },
}

/// What follows a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum Then {
    /// The requests are done: each is answered with the batch's output.
    #[default]
    Finish,
    /// The outputs (hidden states) go on to the next stage of the pipeline; the requests wait
    /// with the policy for it. Only on a stage that is not the last.
    NextStage,
}

/// How a batch runs: its token plan and what follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct BatchPlan {
    pub tokens: TokenPlan,
    pub then: Then,
}

impl BatchPlan {
    /// The plain model, answered at the end: what every batch was before plans.
    pub const FINISH: BatchPlan = BatchPlan { tokens: TokenPlan::Plain, then: Then::Finish };

    pub fn next_stage() -> Self {
        Self { tokens: TokenPlan::Plain, then: Then::NextStage }
    }
}

/// What the policy wants done. Drivers apply actions in order, through the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Run these waiting requests as one batch on an idle instance of their kind and stage,
    /// under `plan`. An encoder batch finishes as a unit; a static batch of generations ends
    /// with its longest.
    Run { instance: InstanceId, requests: Vec<RequestId>, plan: BatchPlan },
    /// Add these waiting generations to the continuous batch on a decoder instance: they start
    /// at its next iteration, and each leaves when done ([`Event::SequencesDone`]).
    Join { instance: InstanceId, requests: Vec<RequestId> },
    /// The next iteration of the continuous batch on `instance`: legal once per
    /// [`Event::SequencesDone`] that leaves generations in the batch, and once after a `Join` on
    /// an idle instance. Generations it leaves out wait for a later step.
    Step { instance: InstanceId, plan: StepPlan },
    /// Give up on a request waiting with the policy; it is answered with `reason`.
    Drop { request: RequestId, reason: DropReason },
    /// Start a new instance of `unit` (scale out, or the new half of a replacement) on
    /// `host` (`None`: wherever the driver finds a free slot). It occupies a device slot at
    /// once and is reported by [`Event::InstanceUp`] with `ticket` once loaded, or by
    /// [`Event::LaunchFailed`] (also when the host has no free slot).
    Launch { ticket: Ticket, unit: UnitSpec, host: Option<HostId> },
    /// Stop an idle instance and free its slot (scale in, or the old half of a replacement).
    Retire { instance: InstanceId },
    /// Load `unit`'s parameters into `host`'s memory without a slot, so that a later launch of it
    /// there starts warm; a host loads one unit at a time, each in a cold start's time. Nothing
    /// reports it; a driver without a host cache ignores it.
    Preload { unit: UnitSpec, host: HostId },
}

/// One of a policy's gauges or counters, as plain data: `name` without the driver's prefix
/// (counters end in `_total`), what it measures (Prometheus' `# HELP` line; one text per name),
/// and its labels. The server formats them for Prometheus.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gauge {
    pub name: String,
    #[serde(skip)]
    pub help: &'static str,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Gauge {
    pub fn new(name: impl Into<String>, help: &'static str, value: f64) -> Self {
        Self { name: name.into(), help, labels: Vec::new(), value }
    }

    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.push((key.into(), value.into()));
        self
    }
}

/// Where a driver puts the initial layout's instances over its hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitialPlacement {
    /// Each on the first host with room: hosts filled one after another.
    Packed,
    /// One per host in turn, so every unit's parameters are cached on a host that still has free
    /// slots beside it and its first scale-up can start warm (QUART §6.2: key stages dispersed,
    /// room kept for their expansion).
    Spread,
}

/// A scheduling policy, driven by events. `Send` so a driver may keep it behind a lock.
pub trait Policy: Send {
    /// Short name for `/info`, metrics labels and reports.
    fn name(&self) -> &str;

    /// Handle one event at time `now`, appending the resulting actions to `actions`.
    fn on_event(&mut self, now: Time, event: Event, actions: &mut Vec<Action>);

    /// Sequences admitted but not yet started.
    fn queue_len(&self) -> usize;

    /// Why the policy would refuse any arrival now, whatever its length, where it learns nothing
    /// from a refused arrival (a full queue): a server may then refuse a call before reading its
    /// tokens, and the policy never sees it. The default, `None`: every arrival is shown to it.
    fn refuses_any(&self) -> Option<DropReason> {
        None
    }

    /// The units to start on a cluster of `slots` device slots, one entry per instance;
    /// `None` if the policy takes whatever the driver was configured with.
    fn layout(&self, slots: usize) -> Option<Vec<UnitSpec>> {
        let _ = slots;
        None
    }

    /// How often the driver should send [`Event::Tick`]; `None` if the policy needs no ticks.
    fn tick_interval(&self) -> Option<Nanos> {
        None
    }

    /// A hint that an event about `instance` comes soon (a simulator at tens of thousands of
    /// instances knows which batch ends next): a policy may ask the cache for what it keeps of
    /// the instance. It changes no decision; the default does nothing.
    fn prefetch(&self, _instance: InstanceId) {}

    /// The instance the next arrival would start on, where the policy knows it (dynamic
    /// batching: its last freed idle instance while nothing waits): a hint like [`Policy::prefetch`],
    /// for a driver to ask the cache for its own records of that instance. The default knows none.
    fn next_start(&self) -> Option<InstanceId> {
        None
    }

    /// Where the initial layout's instances go over the hosts.
    fn initial_placement(&self) -> InitialPlacement {
        InitialPlacement::Packed
    }

    /// Whether new instances may start from parameters kept in host memory (a warm start);
    /// `false` makes every launch cold, as for systems without such a cache.
    fn host_cache(&self) -> bool {
        true
    }

    /// The policy's own gauges and counters (the server exports them as `morph_policy_*`).
    fn gauges(&self) -> Vec<Gauge> {
        Vec::new()
    }

    /// Policy parameters, for `/info` and reports.
    fn describe(&self) -> serde_json::Value;
}
