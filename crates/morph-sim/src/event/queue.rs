//! The event queue: future events in their total order, read epoch by epoch.

use morph_core::Time;

use super::heap::KeyHeap;
use super::{Entry, EventKind, SimEvent};

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
/// A heap beside the buckets (the far one, or the one in the epoch being read) has outgrown them
/// when it holds more than one event for every `OUTGROWN` in the run and the ring.
const OUTGROWN: usize = 4;
/// A rebuild waits for the pops of one event in `REBUILD_EVERY` of those it placed, so events
/// whose spread no width suits (a few far ones beside many near) rebuild at a bounded cost.
const REBUILD_EVERY: usize = 2;
/// So few events, or pops, are not worth a rebuild: no heap beside the buckets has outgrown them
/// below this many, no run is too long, and no rebuild follows another sooner.
const FEW: usize = 64;
/// The buckets' width before the first rebuild sizes them (about a millisecond).
const FIRST_WIDTH_NS: u128 = 1 << 20;

/// Future events, in the total order (time, kind, sequence). Sequence numbers are assigned on
/// push, so equal (time, kind) pop in push order.
///
/// An epoch queue: the events of the epoch being read (times before `boundary`) are a sorted
/// run, latest first, so the next is the run's last; most later ones are appended, unsorted,
/// to a ring of buckets `width` nanoseconds wide and sorted only when their bucket's epoch
/// comes, where a heap walks its height, spread over its memory, for each event. Events pushed
/// into the epoch being read wait in a small heap beside the run, those past the ring in another.
/// The width follows the events (a rebuild when a run comes out too long, a heap beside the
/// buckets outgrows them or a refill walks many empty buckets), so the order never depends on
/// it, only the speed.
#[derive(Debug)]
pub struct EventQueue {
    /// The epoch's events, latest first. It holds at least two while any event lies later.
    run: Vec<Entry>,
    /// Events pushed into the epoch after its run was sorted.
    soon: KeyHeap,
    /// Bucket `(first + i) % BUCKETS` holds the events of `[boundary + i·width,
    /// boundary + (i + 1)·width)`, in no order.
    ring: Vec<Vec<Entry>>,
    /// The ring's bucket that starts at `boundary`.
    first: usize,
    /// Events in the ring's buckets.
    in_ring: usize,
    /// Events past the ring.
    far: KeyHeap,
    /// The epoch's end, in nanoseconds: the run's and `soon`'s events are before it, the ring's
    /// and `far`'s at or after it. Wider than a time, so it never saturates at the clock's end.
    boundary: u128,
    /// Nanoseconds a bucket spans.
    width: u128,
    /// The longest run that does not call for a rebuild.
    widest_run: usize,
    /// Pops left before a rebuild may come again.
    pops_to_rebuild: usize,
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
            width: FIRST_WIDTH_NS,
            widest_run: FEW,
            pops_to_rebuild: 0,
            next_seq: 0,
        }
    }
}

fn nanos(entry: &Entry) -> u128 {
    u128::from(entry.time().0)
}

impl EventQueue {
    pub fn push(&mut self, time: Time, event: SimEvent) {
        let entry = Entry::new(time, self.next_seq, event);
        self.next_seq += 1;
        self.place(entry);
        self.refill();
    }

    /// Files `entry` by its time: into the epoch being read, a bucket of the ring, or past it.
    fn place(&mut self, entry: Entry) {
        let t = nanos(&entry);
        if t < self.boundary {
            self.soon.push(entry);
            return;
        }
        let i = (t - self.boundary) / self.width;
        if i < BUCKETS as u128 {
            self.ring[(self.first + i as usize) % BUCKETS].push(entry);
            self.in_ring += 1;
        } else {
            self.far.push(entry);
        }
    }

    /// Whether the earliest event is the run's last, not the small heap's first.
    fn next_in_run(&self) -> bool {
        match (self.run.last(), self.soon.first()) {
            (Some(r), Some(s)) => r.key < s.key,
            (r, _) => r.is_some(),
        }
    }

    /// The earliest event.
    pub fn pop(&mut self) -> Option<(Time, SimEvent)> {
        let entry = if self.next_in_run() { self.run.pop() } else { self.soon.pop() }?;
        self.pops_to_rebuild = self.pops_to_rebuild.saturating_sub(1);
        self.refill();
        Some((entry.time(), entry.event))
    }

    /// Keeps two events in the run while any lies past it, and rebuilds the buckets when they
    /// no longer suit the events.
    fn refill(&mut self) {
        let walked = self.fill();
        if self.pops_to_rebuild == 0
            && (self.outgrown() || walked.is_some_and(|empty| self.too_narrow_or_wide(empty)))
        {
            self.rebuild();
            self.fill();
        }
    }

    /// The epochs move on, bucket by bucket (or straight to the far heap's earliest when the
    /// ring is empty), until the run holds two events or nothing lies past it. The empty buckets
    /// walked, if it moved at all.
    fn fill(&mut self) -> Option<usize> {
        let mut walked = None;
        while self.run.len() < 2 && (self.in_ring > 0 || !self.far.is_empty()) {
            if self.in_ring == 0 {
                self.boundary = nanos(self.far.first().expect("the loop's condition"));
                self.pull_far();
            }
            let empty = walked.get_or_insert(0);
            *empty += usize::from(self.ring[self.first].is_empty());
            self.advance();
        }
        walked
    }

    /// A heap beside the buckets holds more events than they suit.
    fn outgrown(&self) -> bool {
        let beside = self.far.len().max(self.soon.len());
        beside > FEW + (self.in_ring + self.run.len()) / OUTGROWN
    }

    /// The epoch just read came out too long, or the refill walked too many empty buckets.
    fn too_narrow_or_wide(&self, empty_walked: usize) -> bool {
        self.run.len() > self.widest_run || empty_walked > EMPTY_WALK
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
        self.boundary += self.width;
        self.pull_far();
    }

    /// Moves the far events the ring now reaches into it.
    fn pull_far(&mut self) {
        let reach = self.boundary + self.width * BUCKETS as u128;
        while self.far.first().is_some_and(|e| nanos(e) < reach) {
            let entry = self.far.pop().expect("a first entry");
            self.place(entry);
        }
    }

    /// Files every event again from the earliest: the epoch goes back to it, and the buckets'
    /// width spreads [`NEAR_SHARE`] of the events by time over up to [`FILLED`] buckets.
    fn rebuild(&mut self) {
        let mut all: Vec<Entry> = self.ring.iter_mut().flat_map(|b| b.drain(..)).collect();
        all.extend(self.far.drain());
        all.extend(self.soon.drain());
        all.append(&mut self.run);
        let Some(earliest) = all.iter().map(nanos).min() else { return };
        (self.boundary, self.first, self.in_ring) = (earliest, 0, 0);
        let spread = (all.len() as u64 / PER_BUCKET).clamp(1, FILLED);
        let mut gaps: Vec<u128> = all.iter().map(|e| nanos(e) - earliest).collect();
        let near = ((gaps.len() - 1) as f64 * NEAR_SHARE) as usize;
        let (_, &mut reach, _) = gaps.select_nth_unstable(near);
        self.width = (reach / u128::from(spread)).max(1);
        self.widest_run = (WIDE_RUN * all.len() / spread as usize).max(FEW);
        self.pops_to_rebuild = all.len() / REBUILD_EVERY + FEW;
        for entry in all {
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
        let next = if self.next_in_run() { self.run.last() } else { self.soon.first() };
        next.map(|e| (e.time(), e.event.kind()))
    }

    pub fn is_empty(&self) -> bool {
        self.run.is_empty() && self.soon.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventKind;
    use morph_core::{InstanceId, RequestId, Ticket};

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
            assert_eq!(q.is_empty(), sorted.is_empty());
            assert!(
                q.run.len() >= 2 || q.in_ring + q.far.len() == 0,
                "the run holds two while any lies later"
            );
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

    #[test]
    fn the_last_instant_is_an_instant_like_any_other() {
        // A client with endless patience leaves at the clock's end (`u64::MAX` ns).
        let mut q = EventQueue::default();
        q.push(Time(u64::MAX - 1), SimEvent::Tick);
        q.push(Time(u64::MAX), SimEvent::Tick);
        q.push(Time(u64::MAX), SimEvent::StepDone(InstanceId(1)));
        assert_eq!(q.pop(), Some((Time(u64::MAX - 1), SimEvent::Tick)));
        q.push(Time(u64::MAX), done(2));
        assert_eq!(q.pop(), Some((Time(u64::MAX), SimEvent::StepDone(InstanceId(1)))));
        assert_eq!(q.pop(), Some((Time(u64::MAX), done(2))));
        assert_eq!(q.pop(), Some((Time(u64::MAX), SimEvent::Tick)));
        assert!(q.is_empty());
        let mut alone = EventQueue::default();
        alone.push(Time(u64::MAX), SimEvent::Tick);
        assert_eq!(alone.pop(), Some((Time(u64::MAX), SimEvent::Tick)));
    }

    #[test]
    fn events_before_a_far_first_one_come_back_to_the_buckets() {
        // A tick a second ahead pushed into an empty queue moves the epoch past it; the batch
        // ends pushed after it, milliseconds ahead, land before the epoch's end, in the small
        // heap, until a rebuild takes the epoch back to them and gives them buckets.
        let mut q = EventQueue::default();
        q.push(Time(1_000_000_000), SimEvent::Tick);
        let ahead = |i: u64| 1_000_000 + i * 7_919 % 2_000_000;
        for i in 0..1_000 {
            q.push(Time(ahead(i)), done(1));
        }
        for i in 0..20_000 {
            let (now, _) = q.pop().expect("an event");
            q.push(Time(now.0 + ahead(i)), done(1));
        }
        assert!(q.soon.len() <= FEW, "{} events wait in the small heap", q.soon.len());
        assert!(q.in_ring > 0, "the batch ends are in the ring");
    }
}
