//! The run over time from t = 0, in fixed intervals: what arrived in each, how it ended, and
//! the longest queue, so a start-up or a burst shows where it happened.

use morph_core::{Nanos, Outcome, Time};
use serde::Serialize;

/// One interval. Requests count in the interval they arrived in.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Interval {
    /// Its start, seconds from t = 0.
    pub start_s: f64,
    pub arrived: usize,
    pub completed: usize,
    /// Completed after the SLO.
    pub late: usize,
    /// Dropped or failed.
    pub lost: usize,
    pub cancelled: usize,
    pub mean_latency_ms: f64,
    pub max_latency_ms: f64,
    /// The most requests waiting at any moment of it (of a partitioned run, the sum of each
    /// partition's most: a bound from above).
    pub max_queue: usize,
}

#[derive(Debug)]
pub(crate) struct Timeline {
    width: Nanos,
    intervals: Vec<Interval>,
    /// Σ latency of the completed, per interval.
    sums: Vec<u128>,
}

impl Timeline {
    pub(crate) fn new(width: Nanos) -> Self {
        Self { width: width.max(1), intervals: Vec::new(), sums: Vec::new() }
    }

    fn at(&mut self, t: Time) -> &mut Interval {
        let k = (t.0 / self.width) as usize;
        while self.intervals.len() <= k {
            let start_s = (self.intervals.len() as u64 * self.width) as f64 / 1e9;
            self.intervals.push(Interval { start_s, ..Interval::default() });
            self.sums.push(0);
        }
        &mut self.intervals[k]
    }

    pub(crate) fn arrived(&mut self, at: Time) {
        self.at(at).arrived += 1;
    }

    pub(crate) fn answered(&mut self, arrival: Time, outcome: &Outcome, latency: Nanos, slo: Option<Nanos>) {
        let k = (arrival.0 / self.width) as usize;
        let interval = self.at(arrival);
        match outcome {
            Outcome::Done => {
                interval.completed += 1;
                interval.late += usize::from(slo.is_some_and(|slo| latency > slo));
                interval.max_latency_ms = interval.max_latency_ms.max(latency as f64 / 1e6);
                self.sums[k] += u128::from(latency);
            }
            Outcome::Cancelled => interval.cancelled += 1,
            Outcome::Failed | Outcome::Dropped(_) | Outcome::PolicyError => interval.lost += 1,
        }
    }

    pub(crate) fn queue(&mut self, now: Time, len: usize) {
        let interval = self.at(now);
        interval.max_queue = interval.max_queue.max(len);
    }

    /// Takes in another partition's timeline of the same width, interval by interval.
    pub(crate) fn absorb(&mut self, other: Timeline) {
        debug_assert_eq!(self.width, other.width);
        for (k, (theirs, sum)) in other.intervals.into_iter().zip(other.sums).enumerate() {
            let ours = self.at(Time(k as u64 * self.width));
            ours.arrived += theirs.arrived;
            ours.completed += theirs.completed;
            ours.late += theirs.late;
            ours.lost += theirs.lost;
            ours.cancelled += theirs.cancelled;
            ours.max_latency_ms = ours.max_latency_ms.max(theirs.max_latency_ms);
            ours.max_queue += theirs.max_queue;
            self.sums[k] += sum;
        }
    }

    pub(crate) fn finish(mut self) -> Vec<Interval> {
        for (interval, sum) in self.intervals.iter_mut().zip(&self.sums) {
            if interval.completed > 0 {
                interval.mean_latency_ms = *sum as f64 / interval.completed as f64 / 1e6;
            }
        }
        self.intervals
    }
}
