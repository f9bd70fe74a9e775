//! Simulation events and their total order: time, then kind, then sequence number.

use morph_core::{InstanceId, RequestId, Ticket, Time};

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

/// Future events. Sequence numbers are assigned on push, so equal (time, kind) pop in push order.
#[derive(Debug, Default)]
pub struct EventQueue {
    /// A binary min-heap by key: entry i's children are 2i + 1 and 2i + 2.
    heap: Vec<Entry>,
    next_seq: u64,
}

impl EventQueue {
    pub fn push(&mut self, time: Time, event: SimEvent) {
        let entry = Entry::new(time, self.next_seq, event);
        self.next_seq += 1;
        self.heap.push(entry);
        self.sift_up(self.heap.len() - 1, entry);
    }

    /// Moves `entry` up from the free place `hole` to where its parent is not later.
    fn sift_up(&mut self, mut hole: usize, entry: Entry) {
        while hole > 0 {
            let parent = (hole - 1) / 2;
            if self.heap[parent].key <= entry.key {
                break;
            }
            self.heap[hole] = self.heap[parent];
            hole = parent;
        }
        self.heap[hole] = entry;
    }

    /// The earliest event. The hole its leaving makes goes down to a leaf by the earlier child,
    /// chosen without a branch (which child is earlier is a coin toss a branch predictor misses
    /// half the time, 14 levels down at 15,000 events), and the last entry climbs back from
    /// there: it belongs near the bottom.
    pub fn pop(&mut self) -> Option<(Time, SimEvent)> {
        let last = self.heap.pop()?;
        let Some(&first) = self.heap.first() else { return Some((last.time(), last.event)) };
        let len = self.heap.len();
        let (mut hole, mut child) = (0, 1);
        while child + 1 < len {
            child += usize::from(self.heap[child + 1].key < self.heap[child].key);
            self.heap[hole] = self.heap[child];
            (hole, child) = (child, 2 * child + 1);
        }
        if child < len {
            self.heap[hole] = self.heap[child];
            hole = child;
        }
        self.sift_up(hole, last);
        Some((first.time(), first.event))
    }

    /// The next event and the one after it, without removing them.
    pub fn next_two(&self) -> [Option<SimEvent>; 2] {
        // A heap's second is the first's earlier child.
        let second = self
            .heap
            .get(1..self.heap.len().min(3))
            .and_then(|children| children.iter().min_by_key(|e| e.key));
        [self.heap.first(), second].map(|e| e.map(|e| e.event))
    }

    /// Time and kind of the next event, without removing it.
    pub fn peek(&self) -> Option<(Time, EventKind)> {
        self.heap.first().map(|e| (e.time(), e.event.kind()))
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(instance: u32) -> SimEvent {
        SimEvent::BatchDone { instance: InstanceId(instance), first: RequestId(0) }
    }

    #[test]
    fn pops_by_time_then_kind_then_push_order() {
        // Completions before arrivals before ticks at equal times (arrivals merge by this order).
        assert!(EventKind::BatchDone < EventKind::Arrival && EventKind::Arrival < EventKind::Tick);
        let mut q = EventQueue::default();
        q.push(Time(5), SimEvent::Tick);
        q.push(Time(5), done(2));
        q.push(Time(1), SimEvent::Tick);
        q.push(Time(5), done(1));
        assert_eq!(q.peek(), Some((Time(1), EventKind::Tick)));
        assert_eq!(q.next_two(), [Some(SimEvent::Tick), Some(done(2))]);
        let mut two = EventQueue::default();
        two.push(Time(5), done(2));
        two.push(Time(1), SimEvent::Tick);
        assert_eq!(two.next_two(), [Some(SimEvent::Tick), Some(done(2))], "the second of two events too");
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            order,
            vec![
                (Time(1), SimEvent::Tick),
                (Time(5), done(2)),
                (Time(5), done(1)),
                (Time(5), SimEvent::Tick),
            ]
        );
        assert!(q.is_empty());
    }

    #[test]
    fn pushes_between_pops_keep_the_total_order() {
        // Pushes at or after the last popped time, some at that very instant with a kind that
        // comes earlier: each pop gives what a sorted map of the events pushed so far and not
        // taken gives first.
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut q = EventQueue::default();
        let mut sorted = std::collections::BTreeMap::new();
        let (mut now, mut seq) = (0u64, 0u64);
        for _ in 0..5_000 {
            for _ in 0..rng.random_range(0..3) {
                let (later, event) = match rng.random_range(0..4) {
                    0 => (0, SimEvent::StepDone(InstanceId(1))),
                    1 => (0, SimEvent::LaunchFailed(Ticket(2))),
                    2 => (rng.random_range(0..1_000), done(3)),
                    _ => (rng.random_range(0..50), SimEvent::Tick),
                };
                q.push(Time(now + later), event);
                sorted.insert((now + later, event.kind(), seq), event);
                seq += 1;
            }
            let expected = sorted.pop_first().map(|((at, _, _), e)| (Time(at), e));
            assert_eq!(q.pop(), expected);
            if let Some((at, _)) = expected {
                now = at.0;
            }
        }
        assert_eq!(q.is_empty(), sorted.is_empty());
    }
}
