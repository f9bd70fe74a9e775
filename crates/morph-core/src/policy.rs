//! The policy seam. A policy is a synchronous state machine: a driver (the live server or the
//! simulator) tells it what happened at time `now`, and it answers with [`Action`]s as data.
//! A policy never reads a clock, never blocks and never awaits.

use serde::Serialize;

use crate::instance::{InstanceId, InstanceInfo};
use crate::request::{RequestId, RequestInfo};
use crate::runtime::RuntimeSpec;
use crate::time::{Nanos, Time};

/// Something that happened, reported by the driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// An instance is loaded and idle, ready for batches: one of the initial layout, or one the
    /// policy asked for with [`Action::Launch`] (the driver assigns its id).
    InstanceUp(InstanceInfo),
    /// An [`Action::Launch`] of this runtime failed; no instance will come up for it.
    LaunchFailed { runtime: RuntimeSpec },
    /// A request was admitted by the edge (validated and tokenized).
    Arrival(RequestInfo),
    /// The batch last started on `instance` finished (successfully or not); it is idle again.
    /// For a continuous batch: its last running sequence finished.
    BatchDone { instance: InstanceId },
    /// An iteration of the continuous batch on `instance` ended and these generations in it
    /// finished (maybe none); their slots are free, and requests joined now run in the next
    /// iteration. Reported before the [`Event::BatchDone`] of an emptied batch.
    SequencesDone { instance: InstanceId, requests: Vec<RequestId> },
    /// A periodic tick, every [`Policy::tick_interval`].
    Tick,
}

/// Why a policy refused a request. Drivers map it to their error (HTTP 429, a dropped count).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
pub enum RejectReason {
    #[error("queue is full ({capacity} sequences waiting); retry later")]
    QueueFull { capacity: usize },
    #[error("no instance accepts {len} tokens (longest runtime: {max_len})")]
    NoRuntimeFits { len: u32, max_len: u32 },
}

/// What the policy wants done. Drivers apply actions in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Run these requests as one batch on an idle instance; it finishes as a unit (a static
    /// batch of generations ends with its longest).
    Run { instance: InstanceId, requests: Vec<RequestId> },
    /// Add these generations to the continuous batch on `instance` (iteration-level batching):
    /// they start at its next iteration, and each leaves when done ([`Event::SequencesDone`]).
    Join { instance: InstanceId, requests: Vec<RequestId> },
    /// Refuse a request that arrived; it will never be run.
    Reject { request: RequestId, reason: RejectReason },
    /// Start a new instance of `runtime` (scale out, or the new half of a replacement). It
    /// occupies a device slot at once and is reported by [`Event::InstanceUp`] once loaded.
    Launch { runtime: RuntimeSpec },
    /// Stop an idle instance and free its slot (scale in, or the old half of a replacement).
    /// The policy retires only instances with nothing running and nothing queued for them.
    Retire { instance: InstanceId },
}

/// A scheduling policy, driven by events. `Send` so a driver may keep it behind a lock.
pub trait Policy: Send {
    /// Short name for `/info`, metrics labels and reports.
    fn name(&self) -> &str;

    /// Handle one event at time `now`, appending the resulting actions to `actions`.
    fn on_event(&mut self, now: Time, event: Event, actions: &mut Vec<Action>);

    /// Sequences admitted but not yet started.
    fn queue_len(&self) -> usize;

    /// The runtimes to start on a cluster of `slots` device slots, one entry per instance;
    /// `None` if the policy takes whatever the driver was configured with.
    fn layout(&self, slots: usize) -> Option<Vec<RuntimeSpec>> {
        let _ = slots;
        None
    }

    /// How often the driver should send [`Event::Tick`]; `None` if the policy needs no ticks.
    fn tick_interval(&self) -> Option<Nanos> {
        None
    }

    /// The policy's own gauges and counters for `/metrics`: (series with labels, value), e.g.
    /// `("morph_policy_instances{runtime=\"fixed:64x1\"}", 3.0)`.
    fn gauges(&self) -> Vec<(String, f64)> {
        Vec::new()
    }

    /// Policy parameters, for `/info` and reports.
    fn describe(&self) -> serde_json::Value;
}
