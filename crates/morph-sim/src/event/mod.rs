//! Simulation events and their total order: time, then kind, then sequence number.

mod heap;

use morph_core::{InstanceId, RequestId, Ticket, Time};

use heap::KeyHeap;

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

/// Buckets in the ring past the epoch being read.
const BUCKETS: usize = 128;
/// A rebuild spreads the nearer events (up to [`NEAR_SHARE`] of them by time) over at most this
/// many buckets, so the ring has room for them to spread further...
const FILLED: u64 = 48;
/// ...and over fewer when they are few, about this many to a bucket: a handful of events would
/// otherwise leave the epochs walking empty buckets between them.
const PER_BUCKET: u64 = 64;
/// The share of the pending events, nearest first, a rebuild sizes the buckets by; the rest may
/// wait in the far heap.
const NEAR_SHARE: f64 = 0.9;
/// A run this many times the mean bucket a rebuild planned means the buckets are too wide.
const WIDE_RUN: usize = 4;
/// A refill that walks this many empty buckets means they are too narrow.
const EMPTY_WALK: usize = BUCKETS / 4;
/// Pops between two rebuilds, at least, as a share of the events the last one placed: events
/// whose spread no width suits (a few far ones beside many near) rebuild at a bounded cost.
const REBUILD_EVERY: usize = 2;
/// The far heap outgrows the ring when it holds more than this share of the events before it...
const FAR_SHARE: usize = 4;
/// ...and more than this many: so few events are not worth a rebuild (nor a run this long, nor
/// fewer pops between rebuilds).
const FEW: usize = 64;

/// Future events, in the total order (time, kind, sequence). Sequence numbers are assigned on
/// push, so equal (time, kind) pop in push order.
///
/// An epoch queue: the events of the epoch being read (times before `boundary`) are a sorted
/// run, latest first, so the next is the run's last; the later ones wait unsorted in a ring of
/// buckets `width` nanoseconds wide, and are sorted only when their bucket's epoch comes.
/// A push is an append to one bucket and a pop takes the run's last entry, where a heap of
/// 15,000 batch ends walked 14 levels spread over its memory for each. Events pushed into the
/// epoch being read wait in a small heap beside the run, those past the ring in another; the
/// width follows the events (a rebuild when a run comes out too long, the far heap grows or a
/// refill walks many empty buckets), so the order never depends on it, only the speed.
#[derive(Debug)]
pub struct EventQueue {
    /// The epoch's events, latest first. It holds at least two while any event lies later.
    run: Vec<Entry>,
    /// Events pushed into the epoch after its run was sorted.
    soon: KeyHeap,
    /// Bucket `(first + i) % BUCKETS` holds the events of `[boundary + i·width,
    /// boundary + (i + 1)·width)`, in no order.
    ring: Vec<Vec<Entry>>,
    first: usize,
    in_ring: usize,
    /// Events past the ring.
    far: KeyHeap,
    boundary: u64,
    width: u64,
    /// The longest run that does not call for a rebuild.
    widest_run: usize,
    /// Pops left before the next rebuild may come.
    calm: usize,
    next_seq: u64,
}

impl Default for EventQueue {
    fn default() -> Self {
        Self {
            run: Vec::new(),
            soon: KeyHeap::default(),
            ring: (0..BUCKETS).map(|_| Vec::new()).collect(),
            first: 0,
            in_ring: 0,
            far: KeyHeap::default(),
            boundary: 0,
            width: 1 << 20,
            widest_run: FEW,
            calm: 0,
            next_seq: 0,
        }
    }
}

impl EventQueue {
    pub fn push(&mut self, time: Time, event: SimEvent) {
        let entry = Entry::new(time, self.next_seq, event);
        self.next_seq += 1;
        self.place(entry);
        if self.calm == 0 && self.far.len() > FEW + (self.in_ring + self.run.len()) / FAR_SHARE {
            self.rebuild();
        }
        self.refill();
    }

    /// Files `entry` by its time: into the epoch being read, a bucket of the ring, or past it.
    fn place(&mut self, entry: Entry) {
        let t = entry.time().0;
        if t < self.boundary {
            self.soon.push(entry);
            return;
        }
        match usize::try_from((t - self.boundary) / self.width) {
            Ok(i) if i < BUCKETS => {
                self.ring[(self.first + i) % BUCKETS].push(entry);
                self.in_ring += 1;
            }
            _ => self.far.push(entry),
        }
    }

    /// The earliest event.
    pub fn pop(&mut self) -> Option<(Time, SimEvent)> {
        let from_run = match (self.run.last(), self.soon.first()) {
            (Some(r), Some(s)) => r.key < s.key,
            (r, _) => r.is_some(),
        };
        let entry = if from_run { self.run.pop() } else { self.soon.pop() }?;
        self.calm = self.calm.saturating_sub(1);
        self.refill();
        Some((entry.time(), entry.event))
    }

    /// Keeps two events in the run while any lies past it: the epochs move on, bucket by bucket,
    /// or straight to the far heap's earliest when the ring is empty.
    fn refill(&mut self) {
        let (mut advanced, mut empty) = (false, 0);
        while self.run.len() < 2 && (self.in_ring > 0 || !self.far.is_empty()) {
            if self.in_ring == 0 {
                self.boundary = self.far.first().map_or(self.boundary, |e| e.time().0);
                self.pull_far();
            }
            empty += usize::from(self.ring[self.first].is_empty());
            self.advance();
            advanced = true;
        }
        if advanced && self.calm == 0 && (self.run.len() > self.widest_run || empty > EMPTY_WALK) {
            self.rebuild();
        }
    }

    /// Moves the epoch on by one bucket: its events, sorted latest first, go before what is
    /// left of the run (at most one entry, earlier than all of them).
    fn advance(&mut self) {
        debug_assert!(self.run.len() < 2);
        let rest = self.run.pop();
        std::mem::swap(&mut self.run, &mut self.ring[self.first]);
        self.in_ring -= self.run.len();
        self.run.sort_unstable_by_key(|e| std::cmp::Reverse(e.key));
        self.run.extend(rest);
        self.first = (self.first + 1) % BUCKETS;
        self.boundary = self.boundary.saturating_add(self.width);
        self.pull_far();
    }

    /// Moves the far events the ring now reaches into it.
    fn pull_far(&mut self) {
        let reach = self.boundary.saturating_add(self.width.saturating_mul(BUCKETS as u64));
        while self.far.first().is_some_and(|e| e.time().0 < reach) {
            let entry = self.far.pop().expect("a first entry");
            self.place(entry);
        }
    }

    /// Sizes the buckets again by the events past the epoch: [`NEAR_SHARE`] of them by time
    /// spread over up to [`FILLED`] buckets.
    fn rebuild(&mut self) {
        let mut later: Vec<Entry> = self.ring.iter_mut().flat_map(|b| b.drain(..)).collect();
        later.extend(self.far.drain());
        self.in_ring = 0;
        self.first = 0;
        let spread = (later.len() as u64 / PER_BUCKET).clamp(1, FILLED);
        let mut gaps: Vec<u64> = later.iter().map(|e| e.time().0 - self.boundary).collect();
        if let Some(last) = gaps.len().checked_sub(1) {
            let near = (last as f64 * NEAR_SHARE) as usize;
            let (_, &mut reach, _) = gaps.select_nth_unstable(near);
            self.width = (reach / spread).max(1);
        }
        self.widest_run = (WIDE_RUN * later.len() / spread as usize).max(FEW);
        self.calm = later.len() / REBUILD_EVERY + FEW;
        for entry in later {
            self.place(entry);
        }
    }

    /// The next event and the one after it, without removing them.
    pub fn next_two(&self) -> [Option<SimEvent>; 2] {
        // The run holds two events while any lies past it, so the two are among its last two
        // and the small heap's first two.
        let n = self.run.len();
        let mut candidates =
            [self.run.last(), n.checked_sub(2).map(|i| &self.run[i]), self.soon.first(), self.soon.second()];
        candidates.sort_unstable_by_key(|e| e.map_or(u128::MAX, |e| e.key));
        [candidates[0], candidates[1]].map(|e| e.map(|e| e.event))
    }

    /// Time and kind of the next event, without removing it.
    pub fn peek(&self) -> Option<(Time, EventKind)> {
        let next = match (self.run.last(), self.soon.first()) {
            (Some(r), Some(s)) => Some(if r.key < s.key { r } else { s }),
            (r, s) => r.or(s),
        };
        next.map(|e| (e.time(), e.event.kind()))
    }

    pub fn is_empty(&self) -> bool {
        self.run.is_empty() && self.soon.is_empty()
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

    /// Pushes `pushes(rng)` events (each at a delay past the last popped time) before each of
    /// `pops` pops, and checks every pop, peek and hint against a sorted map of the events
    /// pushed and not yet taken.
    fn agrees_with_a_sorted_map(
        seed: u64,
        pops: usize,
        mut pushes: impl FnMut(&mut rand::rngs::StdRng) -> Vec<(u64, SimEvent)>,
    ) {
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut q = EventQueue::default();
        let mut sorted = std::collections::BTreeMap::new();
        let (mut now, mut seq) = (0u64, 0u64);
        for _ in 0..pops {
            for (later, event) in pushes(&mut rng) {
                q.push(Time(now + later), event);
                sorted.insert((now + later, event.kind(), seq), event);
                seq += 1;
            }
            let mut firsts = sorted.iter().map(|((at, kind, _), e)| (Time(*at), *kind, *e));
            let (first, second) = (firsts.next(), firsts.next());
            assert_eq!(q.peek(), first.map(|(at, kind, _)| (at, kind)));
            assert_eq!(q.next_two(), [first.map(|f| f.2), second.map(|s| s.2)]);
            let expected = sorted.pop_first().map(|((at, _, _), e)| (Time(at), e));
            assert_eq!(q.pop(), expected);
            if let Some((at, _)) = expected {
                now = at.0;
            }
        }
        assert_eq!(q.is_empty(), sorted.is_empty());
    }

    #[test]
    fn pushes_between_pops_keep_the_total_order() {
        // Pushes at or after the last popped time, some at that very instant with a kind that
        // comes earlier: each pop gives what a sorted map of the events pushed so far and not
        // taken gives first.
        use rand::Rng;
        agrees_with_a_sorted_map(7, 5_000, |rng| {
            (0..rng.random_range(0..3))
                .map(|_| match rng.random_range(0..4) {
                    0 => (0, SimEvent::StepDone(InstanceId(1))),
                    1 => (0, SimEvent::LaunchFailed(Ticket(2))),
                    2 => (rng.random_range(0..1_000), done(3)),
                    _ => (rng.random_range(0..50), SimEvent::Tick),
                })
                .collect()
        });
    }

    #[test]
    fn the_order_holds_whatever_the_spread_of_the_events() {
        // Phases of many near batch ends (microseconds to milliseconds) beside ticks a second
        // ahead, clients leaving half a minute ahead and lulls of nothing: the buckets' width is
        // rebuilt as the spread changes, into and out of the far heap, and the epochs jump over
        // the lulls; none of it may change the order.
        use rand::Rng;
        let mut step = 0u64;
        agrees_with_a_sorted_map(11, 40_000, |rng| {
            step += 1;
            let phase = step / 5_000 % 4;
            let n = match phase {
                0 => rng.random_range(1..4),
                1 => rng.random_range(0..2),
                2 => usize::from(rng.random_range(0..50) == 0),
                _ => rng.random_range(0..3),
            };
            (0..n)
                .map(|_| match (phase, rng.random_range(0..10)) {
                    (_, 0) => (1_000_000_000, SimEvent::Tick),
                    (_, 1) => (30_000_000_000, SimEvent::Cancel(RequestId(step))),
                    (2, _) => (rng.random_range(0..10_000_000_000), done(4)),
                    (3, _) => (rng.random_range(0..3) * 1_000, done(5)),
                    _ => (rng.random_range(1_000_000..3_000_000), done(6)),
                })
                .collect()
        });
    }
}
