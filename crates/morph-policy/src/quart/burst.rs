//! QUART's own forecast where the arrivals come in bursts (Morph's extension, issue 74; by
//! default it decides where the bursts last, `bursts = "by-persistence"`, and the envelope
//! fallback where they come and go within a second: see `docs/quart.md`). The paper's λ_i over
//! a window is a mean that a burst longer than the window hides and a lull after it inflates;
//! here the ingress is read as two states, quiet and burst:
//! - the burst state's rate is remembered: the mean of the history's busy bins (an MMPP's two
//!   rates, read off the counts);
//! - a burst has begun when the last bin ran at `enter` × that rate or more, and then every stage
//!   is sized for the whole burst at once (QUART's warm starts bring the replicas up within a
//!   second, where the baselines' cold starts take several);
//! - out of a burst a stage is sized for the rate of the last `settle`, so the burst's replicas go
//!   once it has ended (after the executor's own scale-down delay), not a 60 s envelope later;
//! - the stages stay at the pool's threads (the sizer does not re-thread under the forecast).

use morph_core::time::Seconds;
use morph_core::{Nanos, Time};
use serde::{Deserialize, Serialize};

use crate::pipeline::StageStats;

/// How QUART reads a bursty ingress.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BurstForecast {
    /// The bin arrivals are counted in, for the burst's rate and its onset.
    pub bin_s: Seconds,
    /// A burst is on while the last bin's rate is at least this share of the burst rate.
    pub enter: f64,
    /// Out of a burst, the rate over this long.
    pub settle_s: Seconds,
    /// A stage's queue is drained over this long on top of the forecast (QUART's own
    /// `backlog_drain_s` is for its mean-rate window, which a burst's queue must make up for).
    pub drain_s: Seconds,
    /// Under `bursts = "by-persistence"`, the forecast decides only where the ingress's burst
    /// persistence (the lag-1 autocorrelation of its busy bins of `bin_s`) is at least this, or
    /// not yet known: its two states are then states that last. Renewal arrivals of any CV sit
    /// near 0, an MMPP whose states last 15 s near 0.8.
    pub lasting: f64,
}

impl Default for BurstForecast {
    fn default() -> Self {
        Self { bin_s: Seconds(1.0), enter: 0.5, settle_s: Seconds(3.0), drain_s: Seconds(3.0), lasting: 0.5 }
    }
}

/// What the forecast read off one stage's arrivals.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BurstReading {
    /// The rate to size the stage for (before its backlog).
    pub rate: f64,
    /// Whether a burst is on.
    pub in_burst: bool,
}

impl BurstForecast {
    /// The rate `stats`' stage is sized for at `now`.
    pub fn read(&self, stats: &StageStats, now: Time) -> BurstReading {
        let bin: Nanos = self.bin_s.nanos();
        let recent = stats.rate_over(now, bin);
        let settled = stats.rate_over(now, self.settle_s.nanos());
        match stats.busy_rate(now, bin) {
            Some(burst) if recent >= self.enter * burst => BurstReading { rate: burst, in_burst: true },
            _ => BurstReading { rate: settled.max(recent), in_burst: false },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Nanos = 1_000_000_000;

    /// `rate` arrivals a second, evenly, over [from, to) seconds.
    fn arrive(stats: &mut StageStats, rate: u64, from: u64, to: u64) {
        for k in 0..(to - from) * rate {
            stats.arrive(Time(from * S + k * S / rate));
        }
    }

    #[test]
    fn a_burst_sizes_for_the_remembered_burst_rate_and_its_end_for_the_quiet_rate() {
        let forecast = BurstForecast::default();
        let mut stats = StageStats::new(10 * S, 60 * S, 200);
        // Quiet at 10/s, a burst at 200/s, quiet again.
        arrive(&mut stats, 10, 0, 20);
        arrive(&mut stats, 200, 20, 30);
        arrive(&mut stats, 10, 30, 40);
        let quiet = forecast.read(&stats, Time(40 * S));
        assert!(!quiet.in_burst);
        assert!((quiet.rate - 10.0).abs() < 1.0, "{quiet:?}");
        // The next burst: its first second sizes for the busy state as remembered, the mean of
        // the busy bins (ten at 200/s and this one at 150/s).
        arrive(&mut stats, 150, 40, 41);
        let onset = forecast.read(&stats, Time(41 * S));
        assert!(onset.in_burst);
        let busy = (10.0 * 200.0 + 150.0) / 11.0;
        assert!((onset.rate - busy).abs() < 1.0, "{onset:?}");
        // A 10 s window would still read a mean of 24/s; a 60 s envelope 200/s.
        assert!(stats.rate(Time(41 * S)) < 30.0);
    }

    #[test]
    fn nothing_is_a_burst_before_two_bins() {
        let mut stats = StageStats::new(10 * S, 60 * S, 200);
        arrive(&mut stats, 50, 0, 1);
        let early = BurstForecast::default().read(&stats, Time(S));
        assert!(!early.in_burst);
        assert!((early.rate - 50.0).abs() <= 1.0, "{early:?}");
    }
}
