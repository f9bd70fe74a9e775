//! What a pipeline stage measured: its arrivals (rate λ_i over a sliding window, and the CV of
//! its last inter-arrival times) and the delays of the requests it finished.

use std::collections::VecDeque;

use morph_core::time::nanos_to_secs;
use morph_core::{Nanos, Time};

/// Sliding windows over one stage's arrivals and completions.
#[derive(Debug, Clone)]
pub struct StageStats {
    /// λ_i and the observed delay are taken over this window.
    window: Nanos,
    /// Arrival times are kept this long (traffic envelopes look back further than `window`).
    history: Nanos,
    arrivals: VecDeque<Time>,
    /// The last `cv_window` inter-arrival gaps, in seconds.
    gaps: VecDeque<f64>,
    cv_window: usize,
    /// (finish time, time spent at the stage) of requests it finished.
    delays: VecDeque<(Time, Nanos)>,
    total_arrivals: u64,
}

impl StageStats {
    pub fn new(window: Nanos, history: Nanos, cv_window: usize) -> Self {
        Self {
            window,
            history: history.max(window),
            arrivals: VecDeque::new(),
            gaps: VecDeque::new(),
            cv_window: cv_window.max(2),
            delays: VecDeque::new(),
            total_arrivals: 0,
        }
    }

    pub fn arrive(&mut self, now: Time) {
        if let Some(&last) = self.arrivals.back() {
            self.gaps.push_back(nanos_to_secs(now.since(last)));
            if self.gaps.len() > self.cv_window {
                self.gaps.pop_front();
            }
        }
        self.arrivals.push_back(now);
        self.total_arrivals += 1;
        self.forget(now);
    }

    /// A request spent `delay` at this stage (queued and served), finishing at `now`.
    pub fn finished(&mut self, now: Time, delay: Nanos) {
        self.delays.push_back((now, delay));
        self.forget(now);
    }

    fn forget(&mut self, now: Time) {
        let horizon = Time(now.0.saturating_sub(self.history));
        while self.arrivals.front().is_some_and(|&t| t < horizon) {
            self.arrivals.pop_front();
        }
        let recent = Time(now.0.saturating_sub(self.window));
        while self.delays.front().is_some_and(|&(t, _)| t < recent) {
            self.delays.pop_front();
        }
    }

    /// λ_i in requests per second over the window (over the time so far, early on).
    pub fn rate(&self, now: Time) -> f64 {
        self.rate_over(now, self.window)
    }

    /// Arrivals per second over the last `span` (at most the history kept).
    pub fn rate_over(&self, now: Time, span: Nanos) -> f64 {
        let span = span.min(self.history).min(now.0).max(1);
        let since = Time(now.0 - span);
        let count = self.arrivals.iter().rev().take_while(|&&t| t > since).count();
        count as f64 / nanos_to_secs(span)
    }

    /// The CV (σ/mean) of the last inter-arrival times, and how many gaps it rests on;
    /// `None` before two gaps.
    pub fn cv(&self) -> Option<(f64, usize)> {
        let n = self.gaps.len();
        if n < 2 {
            return None;
        }
        let mean = self.gaps.iter().sum::<f64>() / n as f64;
        if mean <= 0.0 {
            return None;
        }
        let var = self.gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        Some((var.sqrt() / mean, n))
    }

    /// The index of dispersion of the arrivals kept (the history): the variance over the mean
    /// of their counts in bins of `bin`, 1 for Poisson arrivals, far above it when bursts and
    /// lulls last longer than a bin. `None` before two whole bins have passed.
    pub fn dispersion(&self, now: Time, bin: Nanos) -> Option<f64> {
        let counts = self.bin_counts(now, bin)?;
        let n = counts.len() as f64;
        let mean = counts.iter().map(|&c| f64::from(c)).sum::<f64>() / n;
        if mean <= 0.0 {
            return None;
        }
        let var = counts.iter().map(|&c| (f64::from(c) - mean).powi(2)).sum::<f64>() / (n - 1.0);
        Some(var / mean)
    }

    /// Whether the history's bursts last longer than a bin of `bin`: the lag-1 autocorrelation
    /// of its busy bins (those at half the busiest or more, the burst state as [`Self::busy_rate`]
    /// reads it), (P(busy | the bin before busy) − P(busy)) / (1 − P(busy)). Near 1 when a
    /// burst's second follows its first (an MMPP's states), near 0 for bursts that begin and end
    /// within a bin (renewal arrivals of any CV), 0 when every bin is busy (no quiet state);
    /// `None` while no busy bin has yet had a bin after it (at a first burst's onset: no
    /// evidence either way).
    pub fn burst_persistence(&self, now: Time, bin: Nanos) -> Option<f64> {
        let counts = self.bin_counts(now, bin)?;
        let most = *counts.iter().max()?;
        let busy: Vec<bool> = counts.iter().map(|&c| most > 0 && in_burst(c, most)).collect();
        let share = busy.iter().filter(|&&b| b).count() as f64 / busy.len() as f64;
        let after_busy: Vec<bool> = busy.windows(2).filter(|w| w[0]).map(|w| w[1]).collect();
        if after_busy.is_empty() {
            return None;
        }
        if share >= 1.0 {
            return Some(0.0);
        }
        let followed = after_busy.iter().filter(|&&b| b).count() as f64 / after_busy.len() as f64;
        Some((followed - share) / (1.0 - share))
    }

    /// The rate of the busy state, read off the history in bins of `bin` as a two-state
    /// (MMPP) process: the mean of the bins that ran at half the busiest one or more, as
    /// arrivals per second. The busiest bin alone overshoots by the state's own Poisson noise.
    /// `None` before two whole bins have passed.
    pub fn busy_rate(&self, now: Time, bin: Nanos) -> Option<f64> {
        let counts = self.bin_counts(now, bin)?;
        let most = *counts.iter().max()?;
        let busy: Vec<u32> = counts.into_iter().filter(|&c| in_burst(c, most)).collect();
        let mean = busy.iter().map(|&c| f64::from(c)).sum::<f64>() / busy.len() as f64;
        Some(mean / nanos_to_secs(bin.max(1)))
    }

    /// The arrivals kept, counted in the whole bins of `bin` that end at `now`; `None` before two.
    fn bin_counts(&self, now: Time, bin: Nanos) -> Option<Vec<u32>> {
        let bin = bin.max(1);
        let bins = (self.history.min(now.0) / bin) as usize;
        if bins < 2 {
            return None;
        }
        let start = now.0 - bins as u64 * bin;
        let mut counts = vec![0u32; bins];
        for &t in self.arrivals.iter().filter(|t| t.0 >= start) {
            let k = (((t.0 - start) / bin) as usize).min(bins - 1);
            counts[k] += 1;
        }
        Some(counts)
    }

    /// Mean time a request spent at the stage over the window, in seconds.
    pub fn observed_delay(&self) -> Option<f64> {
        let n = self.delays.len();
        (n > 0).then(|| nanos_to_secs(self.delays.iter().map(|d| d.1).sum::<Nanos>()) / n as f64)
    }

    pub fn total_arrivals(&self) -> u64 {
        self.total_arrivals
    }
}

/// A bin of `count` arrivals is in the burst state when it ran at half the busiest bin (`most`)
/// or more: the two-state reading shared by the busy rate and the bursts' persistence.
fn in_burst(count: u32, most: u32) -> bool {
    2 * count >= most
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Nanos = 1_000_000_000;

    #[test]
    fn dispersion_is_zero_for_even_arrivals_and_large_for_on_off_bursts() {
        let mut even = StageStats::new(10 * S, 60 * S, 200);
        let mut bursts = StageStats::new(10 * S, 60 * S, 200);
        for k in 0..6_000u64 {
            let t = Time(k * S / 100);
            even.arrive(t);
            // On for 10 s, off for 10 s, at twice the rate while on.
            if (t.0 / (10 * S)).is_multiple_of(2) {
                bursts.arrive(t);
                bursts.arrive(Time(t.0 + S / 200));
            }
        }
        let now = Time(60 * S);
        assert!(even.dispersion(now, S).unwrap() < 0.01);
        assert!(bursts.dispersion(now, S).unwrap() > 50.0, "{:?}", bursts.dispersion(now, S));
        assert_eq!(StageStats::new(10 * S, 60 * S, 200).dispersion(Time(S), S), None);
    }

    #[test]
    fn bursts_that_last_persist_and_alternating_ones_do_not() {
        let mut lasting = StageStats::new(10 * S, 60 * S, 200);
        let mut alternating = StageStats::new(10 * S, 60 * S, 200);
        for k in 0..6_000u64 {
            let t = Time(k * S / 100);
            // On for 10 s and off for 10 s; on for 1 s and off for 1 s.
            if (t.0 / (10 * S)).is_multiple_of(2) {
                lasting.arrive(t);
            }
            if (t.0 / S).is_multiple_of(2) {
                alternating.arrive(t);
            }
        }
        let now = Time(60 * S);
        // 30 busy bins of 60, each with a bin after it; 27 of those are busy too.
        let expected = (27.0 / 30.0 - 0.5) / 0.5;
        assert!((lasting.burst_persistence(now, S).unwrap() - expected).abs() < 1e-9);
        assert_eq!(alternating.burst_persistence(now, S), Some(-1.0));
        let mut even = StageStats::new(10 * S, 60 * S, 200);
        (0..600u64).for_each(|k| even.arrive(Time(k * S / 10)));
        assert_eq!(even.burst_persistence(now, S), Some(0.0), "every bin busy: no quiet state");
        // A first burst's first second after a quiet minute: nothing says yet whether it lasts.
        let mut onset = StageStats::new(10 * S, 60 * S, 200);
        (0..59u64).for_each(|s| onset.arrive(Time(s * S + S / 2)));
        (0..100u64).for_each(|k| onset.arrive(Time(59 * S + k * S / 100)));
        assert_eq!(onset.burst_persistence(now, S), None);
    }

    #[test]
    fn rate_counts_the_window_and_cv_of_even_gaps_is_zero() {
        let mut s = StageStats::new(10 * S, 60 * S, 200);
        for k in 1..=100u64 {
            s.arrive(Time(k * S / 4));
        }
        assert!((s.rate(Time(25 * S)) - 4.0).abs() < 0.11, "{}", s.rate(Time(25 * S)));
        let (cv, n) = s.cv().unwrap();
        assert!(cv < 1e-9 && n == 99);
        assert!(s.rate(Time(200 * S)) == 0.0, "arrivals age out of the window");
    }

    #[test]
    fn cv_of_alternating_gaps_and_the_observed_delay() {
        let mut s = StageStats::new(10 * S, 10 * S, 4);
        let mut t = 0;
        for k in 0..9u64 {
            t += if k % 2 == 0 { S / 10 } else { 3 * S / 10 };
            s.arrive(Time(t));
        }
        // Gaps 0.1, 0.3, 0.1, 0.3 (the last four): mean 0.2, sample σ 0.1155.
        let (cv, n) = s.cv().unwrap();
        assert_eq!(n, 4);
        assert!((cv - 0.57735).abs() < 1e-4, "{cv}");
        s.finished(Time(t), S / 2);
        s.finished(Time(t), S / 4);
        assert_eq!(s.observed_delay(), Some(0.375));
    }
}
