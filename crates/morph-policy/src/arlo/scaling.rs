//! Autoscaling. Arlo uses target tracking on tail latency (§4); its baselines use INFaaS's
//! headroom rule on utilisation (§5 "Compared schemes"). Both are checked on every tick and
//! look at a sliding window of recent observations.

use morph_core::time::Seconds;
use std::collections::VecDeque;

use morph_core::{Nanos, Time, stats::percentile, time::nanos_to_ms};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScaleDecision {
    Out,
    In,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ScalingRule {
    /// Fixed size.
    #[default]
    Off,
    /// Arlo §4: add an instance when the p98 latency of recent requests reaches 95% of the SLO;
    /// remove the least busy one when it has stayed under 50% for a whole scale-in period.
    TargetTracking,
    /// INFaaS-like: add an instance when utilisation exceeds 1 − headroom; remove one when the
    /// rest would stay under 1 − 2·headroom for a whole scale-in period.
    Headroom,
}

/// The scaler's parameters; the paper's values by default.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScalingConfig {
    pub rule: ScalingRule,
    /// Observations older than this are forgotten ("recent requests").
    pub window_s: Seconds,
    /// How long the cluster must stay calm before one instance is removed (Arlo: 60 s).
    pub scale_in_period_s: Seconds,
    /// Target tracking: scale out at this share of the SLO (0.95) …
    pub out_at_slo: f64,
    /// … and scale in below this share (0.5).
    pub in_below_slo: f64,
    /// Headroom rule: spare utilisation kept (0.2).
    pub headroom: f64,
    pub min_instances: usize,
    pub max_instances: usize,
}

impl Default for ScalingConfig {
    fn default() -> Self {
        Self {
            rule: ScalingRule::Off,
            window_s: Seconds(10.0),
            scale_in_period_s: Seconds(60.0),
            out_at_slo: 0.95,
            in_below_slo: 0.5,
            headroom: 0.2,
            min_instances: 1,
            max_instances: 1_000,
        }
    }
}

#[derive(Debug)]
pub struct Scaler {
    config: ScalingConfig,
    slo: Nanos,
    /// (completion time, latency).
    latencies: VecDeque<(Time, Nanos)>,
    /// (end time, busy span) of finished batches.
    busy: VecDeque<(Time, Nanos)>,
    calm_since: Option<Time>,
}

impl Scaler {
    pub fn new(config: ScalingConfig, slo: Nanos) -> Self {
        Self { config, slo, latencies: VecDeque::new(), busy: VecDeque::new(), calm_since: None }
    }

    pub fn completed(&mut self, now: Time, latency: Nanos) {
        if self.config.rule == ScalingRule::TargetTracking {
            self.latencies.push_back((now, latency));
        }
    }

    /// The cluster changed size (an added instance came up, or one was removed): what was
    /// observed before says nothing about the new size, so target tracking starts afresh
    /// (the cool-down of target tracking: judge an action by its effect).
    pub fn resized(&mut self) {
        self.latencies.clear();
        self.calm_since = None;
    }

    pub fn batch_done(&mut self, now: Time, span: Nanos) {
        if self.config.rule == ScalingRule::Headroom {
            self.busy.push_back((now, span));
        }
    }

    /// Checked on every tick. `instances` counts every instance holding a slot (starting ones
    /// included); `starting` those not up yet (no scale-out while one is loading).
    pub fn decide(&mut self, now: Time, instances: usize, starting: usize) -> Option<ScaleDecision> {
        let window = self.config.window_s.nanos();
        let cutoff = Time(now.0.saturating_sub(window));
        while self.latencies.front().is_some_and(|(t, _)| *t < cutoff) {
            self.latencies.pop_front();
        }
        while self.busy.front().is_some_and(|(t, _)| *t < cutoff) {
            self.busy.pop_front();
        }
        let (hot, calm) = match self.config.rule {
            ScalingRule::Off => return None,
            ScalingRule::TargetTracking => {
                if self.latencies.is_empty() {
                    (false, false)
                } else {
                    let mut ms: Vec<f64> = self.latencies.iter().map(|(_, l)| nanos_to_ms(*l)).collect();
                    ms.sort_by(f64::total_cmp);
                    let p98 = percentile(&ms, 0.98) / nanos_to_ms(self.slo);
                    (p98 >= self.config.out_at_slo, p98 < self.config.in_below_slo)
                }
            }
            ScalingRule::Headroom => {
                let span = now.0.min(window).max(1) as f64;
                let serving = instances.saturating_sub(starting).max(1) as f64;
                let busy: f64 = self.busy.iter().map(|(_, b)| *b as f64).sum();
                let util = busy / (span * serving);
                let spare = 1.0 - self.config.headroom;
                let after_one_less = if serving > 1.0 { util * serving / (serving - 1.0) } else { f64::MAX };
                (util > spare, after_one_less < 1.0 - 2.0 * self.config.headroom)
            }
        };
        if hot {
            self.calm_since = None;
            let room = instances < self.config.max_instances;
            return (room && starting == 0).then_some(ScaleDecision::Out);
        }
        if !calm {
            self.calm_since = None;
            return None;
        }
        let since = *self.calm_since.get_or_insert(now);
        let period = self.config.scale_in_period_s.nanos();
        if now.since(since) >= period && instances > self.config.min_instances {
            self.calm_since = Some(now);
            return Some(ScaleDecision::In);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SLO: Nanos = 100_000_000;
    const S: u64 = 1_000_000_000;

    fn tracking() -> Scaler {
        Scaler::new(ScalingConfig { rule: ScalingRule::TargetTracking, ..ScalingConfig::default() }, SLO)
    }

    #[test]
    fn target_tracking_scales_out_at_95_percent_of_the_slo() {
        let mut s = tracking();
        for i in 0..100 {
            s.completed(Time(i), 90_000_000);
        }
        assert_eq!(s.decide(Time(S), 4, 0), None, "p98 at 90% of the SLO");
        for _ in 0..3 {
            s.completed(Time(S), 96_000_000);
        }
        assert_eq!(s.decide(Time(S), 4, 0), Some(ScaleDecision::Out));
        assert_eq!(s.decide(Time(S), 4, 1), None, "one is still starting");
    }

    #[test]
    fn target_tracking_scales_in_after_a_calm_period_only() {
        let mut s = tracking();
        for t in 0..=60 {
            s.completed(Time(t * S), 10_000_000);
            let d = s.decide(Time(t * S), 4, 0);
            assert_eq!(d, if t == 60 { Some(ScaleDecision::In) } else { None }, "at {t} s");
        }
        // A hot moment restarts the period.
        s.completed(Time(61 * S), 60_000_000);
        assert_eq!(s.decide(Time(61 * S), 3, 0), None);
        assert_eq!(s.decide(Time(200 * S), 1, 0), None, "never below min_instances");
    }

    #[test]
    fn headroom_follows_utilisation() {
        let mut s =
            Scaler::new(ScalingConfig { rule: ScalingRule::Headroom, ..ScalingConfig::default() }, SLO);
        // Two instances, 10 s window, 17 s busy in total: 85% > 80%.
        s.batch_done(Time(10 * S), 17 * S);
        assert_eq!(s.decide(Time(10 * S), 2, 0), Some(ScaleDecision::Out));
        let mut s =
            Scaler::new(ScalingConfig { rule: ScalingRule::Headroom, ..ScalingConfig::default() }, SLO);
        // Four instances at 10%: three would be at 13% < 60%; removed after 60 calm seconds.
        for t in 10..=70 {
            s.batch_done(Time(t * S), 4 * S / 10);
            let d = s.decide(Time(t * S), 4, 0);
            assert_eq!(d, if t == 70 { Some(ScaleDecision::In) } else { None }, "at {t} s");
        }
    }
}
