//! Serving capacity against the current need, for replacing instances make-before-break
//! (Morph's robust Arlo, not the paper's): how many requests per second a set of instances
//! cannot serve, given the requests per second each runtime class brings now.
//!
//! The capacity is the allocation's own stable accounting (`super::reallocate::Accounting`):
//! an instance of runtime i serves M_i = u·SLO/s_i requests per SLO period, a class is served
//! first by its own runtime and what it cannot take carries to the longer runtimes (Eq. 4),
//! and what carries past the longest is the shortfall. A dynamic-shaped runtime is counted at
//! its longest length, so the account errs on the side of keeping instances.

use std::collections::VecDeque;

use morph_core::RuntimeSpec;
use morph_core::time::nanos_to_secs;

use super::service::ServiceModel;

/// Requests per second `counts` instances of `runtimes` (ascending) cannot serve at
/// utilisation `u`, when class i (the requests whose ideal runtime is i) brings `need[i]`
/// requests per second.
pub fn shortfall(
    model: &ServiceModel,
    runtimes: &[RuntimeSpec],
    counts: &[usize],
    need: &[f64],
    u: f64,
) -> f64 {
    let slo_s = nanos_to_secs(model.slo());
    let mut carried = 0.0;
    for ((runtime, &n), &own) in runtimes.iter().zip(counts).zip(need) {
        // Eq. 4: R_i = max(R_{i−1} + Q_i − N_i·M_i, 0), per second.
        let served = n as f64 * model.stable_capacity(*runtime, u) / slo_s;
        carried = (carried + own - served).max(0.0);
    }
    carried
}

/// The lengths of the last few ticks' arrivals, for the need now: a burst shows within a tick.
#[derive(Debug, Clone)]
pub struct RecentLengths {
    /// Per tick, the arrivals by length (the longest bin takes every longer one).
    ticks: VecDeque<Vec<u32>>,
    keep: usize,
}

impl RecentLengths {
    /// Keeps `keep` ticks of lengths up to `max_len`.
    pub fn new(max_len: u32, keep: usize) -> Self {
        let mut ticks = VecDeque::with_capacity(keep + 1);
        ticks.push_back(vec![0; max_len as usize + 1]);
        Self { ticks, keep: keep.max(1) }
    }

    pub fn record(&mut self, len: u32) {
        let current = self.ticks.back_mut().expect("one tick is always open");
        let at = (len as usize).min(current.len() - 1);
        current[at] += 1;
    }

    /// A tick ended: a new one opens, the oldest beyond `keep` is forgotten.
    pub fn roll(&mut self) {
        let bins = self.ticks.back().map_or(1, Vec::len);
        self.ticks.push_back(vec![0; bins]);
        while self.ticks.len() > self.keep + 1 {
            self.ticks.pop_front();
        }
    }

    /// Requests per second per class of `runtimes` (ascending): the busiest of the kept ticks
    /// (each `tick_s` long) for each class, the open tick counting as a whole one.
    pub fn need(&self, runtimes: &[RuntimeSpec], tick_s: f64) -> Vec<f64> {
        let mut most = vec![0u32; runtimes.len()];
        for tick in &self.ticks {
            let mut counts = vec![0u32; runtimes.len()];
            for (len, &n) in tick.iter().enumerate() {
                let i = runtimes.partition_point(|r| (r.max_len as usize) < len).min(runtimes.len() - 1);
                counts[i] += n;
            }
            most.iter_mut().zip(counts).for_each(|(m, c)| *m = (*m).max(c));
        }
        most.into_iter().map(|n| f64::from(n) / tick_s.max(f64::MIN_POSITIVE)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> ServiceModel {
        super::super::service::two_point_model()
    }

    #[test]
    fn the_shortfall_carries_what_a_class_cannot_take_to_the_longer_runtimes() {
        // u = 1: a 64-token instance serves 1000/s, a 512-token one 250/s.
        let runtimes = [RuntimeSpec::fixed(64, 1), RuntimeSpec::fixed(512, 1)];
        let m = model();
        // 1 500 short/s: 1 000 served short, 500 carried; long takes its own 100 + 150 of them.
        assert!((shortfall(&m, &runtimes, &[1, 1], &[1_500.0, 100.0], 1.0) - 350.0).abs() < 1e-9);
        assert_eq!(shortfall(&m, &runtimes, &[2, 1], &[1_500.0, 100.0], 1.0), 0.0);
        // Nothing carries backwards: idle short instances do not serve long requests.
        assert!((shortfall(&m, &runtimes, &[5, 0], &[0.0, 100.0], 1.0) - 100.0).abs() < 1e-9);
    }

    #[test]
    fn the_need_is_the_busiest_recent_tick_per_class() {
        let runtimes = [RuntimeSpec::fixed(64, 1), RuntimeSpec::fixed(512, 1)];
        let mut recent = RecentLengths::new(512, 2);
        (0..30).for_each(|_| recent.record(10));
        recent.roll();
        (0..5).for_each(|_| recent.record(10));
        (0..7).for_each(|_| recent.record(600));
        assert_eq!(recent.need(&runtimes, 0.5), vec![60.0, 14.0]);
        recent.roll();
        recent.roll();
        assert_eq!(recent.need(&runtimes, 0.5), vec![10.0, 14.0], "the first tick is forgotten");
    }
}
