//! Morph's burst guard (not the paper's): the batch about to start is the one decision that
//! cannot be taken back, so it runs a slower plan than the fastest only with time to spare.
//! Both planners (Alg. 2 and 3) spend the slack they see in the queue; under arrivals far
//! burstier than Poisson (inter-arrival CV ≫ 1) the queue is short in a lull and a burst then
//! lands on a server busy with a slow batch, so OTAS evicted more than its own fastest fixed
//! plan. The guard lets the plan be slower only by less than what every queued batch would keep
//! if all ran on the fastest plan after it, and less than the room a burst as large as the
//! recent peak would need to meet the shortest recent SLO.

use std::collections::VecDeque;

use morph_core::{Nanos, Time};

use super::plan::BatchCosts;

/// What a burst arriving now would need: its work on the fastest plan, and the shortest SLO it
/// would carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Burst {
    pub work: Nanos,
    pub slo: Nanos,
}

/// The slowest plan, no slower than `plan`, that batch `first` of `costs` (deadline order,
/// plans fastest first) may run from `now`: its extra time over the fastest plan must be less
/// than the least slack of the queue run on the fastest plan with `first` before the rest
/// (batches that would miss even so are left out: they are evicted anyway), and less than the
/// room left for `burst` after that run.
pub fn affordable(now: Time, costs: &[BatchCosts], first: usize, plan: usize, burst: Option<Burst>) -> usize {
    let fastest = |b: usize| costs[b].by_plan[0].0;
    let mut clock = now.0.saturating_add(fastest(first));
    let mut spare = i128::from(costs[first].deadline.0) - i128::from(clock);
    for (b, batch) in costs.iter().enumerate().filter(|(b, _)| *b != first) {
        let end = clock.saturating_add(fastest(b));
        if end < batch.deadline.0 {
            clock = end;
            spare = spare.min(i128::from(batch.deadline.0) - i128::from(clock));
        }
    }
    if let Some(Burst { work, slo }) = burst {
        let room = i128::from(now.0) + i128::from(slo) - i128::from(clock) - i128::from(work);
        spare = spare.min(room);
    }
    let extra = |l: usize| i128::from(costs[first].by_plan[l].0) - i128::from(fastest(first));
    (0..=plan).rev().find(|&l| l == 0 || extra(l) < spare).unwrap_or(0)
}

/// Recent arrivals with their SLOs, for the largest burst of the last window.
#[derive(Debug, Clone)]
pub struct Bursts {
    window: Nanos,
    /// (arrival, its SLO), oldest first.
    seen: VecDeque<(Time, Nanos)>,
}

impl Bursts {
    pub fn new(window: Nanos) -> Self {
        Self { window, seen: VecDeque::new() }
    }

    pub fn record(&mut self, now: Time, slo: Nanos) {
        self.seen.push_back((now, slo));
        while self.seen.front().is_some_and(|&(t, _)| now.since(t) > self.window) {
            self.seen.pop_front();
        }
    }

    /// The shortest SLO seen in the window, and the most arrivals within any span of it there.
    pub fn peak(&self) -> Option<(usize, Nanos)> {
        let slo = self.seen.iter().map(|&(_, s)| s).min()?;
        let (mut most, mut from) = (0, 0);
        for (to, &(t, _)) in self.seen.iter().enumerate() {
            while t.since(self.seen[from].0) >= slo {
                from += 1;
            }
            most = most.max(to + 1 - from);
        }
        Some((most, slo))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    /// Plans 10 / 20 / 40 ms a batch.
    fn batch(deadline_ms: u64) -> BatchCosts {
        let by_plan = [10, 20, 40].iter().map(|ms| (ms * MS, 1.0)).collect();
        BatchCosts { deadline: Time(deadline_ms * MS), mean_utility: 0.5, by_plan }
    }

    #[test]
    fn a_slower_plan_only_within_the_slack_the_rest_of_the_queue_keeps() {
        // Alone with 100 ms to spare: the slowest plan (30 ms more than the fastest).
        assert_eq!(affordable(Time::ZERO, &[batch(100)], 0, 2, None), 2);
        // A second batch due at 35: fast, the two end at 10 and 20 (15 ms spare): plan 1 (10 ms
        // more) fits, plan 2 (30 ms more) does not.
        assert_eq!(affordable(Time::ZERO, &[batch(100), batch(35)], 0, 2, None), 1);
        // Due at 25: 5 ms spare, the fastest only.
        assert_eq!(affordable(Time::ZERO, &[batch(100), batch(25)], 0, 2, None), 0);
        // A batch that misses even on the fastest plan does not hold the others back.
        assert_eq!(affordable(Time::ZERO, &[batch(100), batch(15)], 0, 2, None), 2);
    }

    #[test]
    fn a_burst_as_large_as_the_recent_peak_keeps_its_room() {
        // Room for a 50 ms burst within a 100 ms SLO after a 10 ms batch: 40 ms; plan 2 needs 30.
        let burst = Some(Burst { work: 50 * MS, slo: 100 * MS });
        assert_eq!(affordable(Time::ZERO, &[batch(1000)], 0, 2, burst), 2);
        let burst = Some(Burst { work: 70 * MS, slo: 100 * MS });
        assert_eq!(affordable(Time::ZERO, &[batch(1000)], 0, 2, burst), 1);
    }

    #[test]
    fn the_peak_is_the_most_arrivals_within_the_shortest_slo() {
        let mut b = Bursts::new(10_000 * MS);
        for t in [0, 10, 20, 30, 500, 505] {
            b.record(Time(t * MS), 600 * MS);
        }
        assert_eq!(b.peak(), Some((6, 600 * MS)));
        b.record(Time(700 * MS), 100 * MS);
        assert_eq!(b.peak(), Some((4, 100 * MS)), "0–30 are four within 100 ms");
        b.record(Time(20_000 * MS), 600 * MS);
        assert_eq!(b.peak(), Some((1, 600 * MS)), "the window forgets");
    }
}
