//! Simulation events and their total order: time, then kind, then sequence number.

mod heap;
mod queue;

use morph_core::{InstanceId, RequestId, Ticket, Time};

pub use queue::EventQueue;

/// At equal times, completions come first (an instance freed at `t` can take a request that
/// arrives at `t`), then instances coming up, then arrivals, then clients leaving, then ticks. Arrivals are not queued: the driver merges its
/// pre-generated stream with this queue by the same (time, kind) order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum EventKind {
    StepDone,
    BatchDone,
    InstanceUp,
    Arrival,
    Cancel,
    Tick,
}

/// The events the queue holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimEvent {
    /// An iteration of a continuous batch ended.
    StepDone(InstanceId),
    /// A batch ended; `first`: its first request (what the driver asks the cache for ahead).
    BatchDone {
        instance: InstanceId,
        first: RequestId,
    },
    /// The launch with this ticket finished loading.
    InstanceUp(Ticket),
    /// The launch with this ticket found no slot.
    LaunchFailed(Ticket),
    /// A client gives up on its request.
    Cancel(RequestId),
    Tick,
}

impl SimEvent {
    fn kind(self) -> EventKind {
        match self {
            SimEvent::StepDone(_) => EventKind::StepDone,
            SimEvent::BatchDone { .. } => EventKind::BatchDone,
            SimEvent::InstanceUp(_) | SimEvent::LaunchFailed(_) => EventKind::InstanceUp,
            SimEvent::Cancel(_) => EventKind::Cancel,
            SimEvent::Tick => EventKind::Tick,
        }
    }
}

/// An event with its place in the total order, packed as one number: time, then kind, then
/// sequence (`time << 64 | kind << 56 | seq`), so a comparison is one integer comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    key: u128,
    event: SimEvent,
}

/// Sequence numbers fit below the kind's bits.
const SEQ_BITS: u32 = 56;

impl Entry {
    fn new(time: Time, seq: u64, event: SimEvent) -> Self {
        debug_assert!(seq < 1 << SEQ_BITS);
        let kind = event.kind() as u128;
        Self { key: (u128::from(time.0) << 64) | (kind << SEQ_BITS) | u128::from(seq), event }
    }

    fn time(&self) -> Time {
        Time((self.key >> 64) as u64)
    }
}
