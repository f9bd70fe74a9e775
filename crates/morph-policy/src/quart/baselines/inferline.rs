//! InferLine-like (spec §2.5): every stage sized from the ingress traffic envelope, blind to how
//! burstiness changes along the pipeline. The envelope's rate is the largest arrival rate over
//! windows from the pipeline's service time doubling up to 60 s; stage m gets
//! ⌈r_max · s_m⌉ replicas. The planner's starting point is sized for the backlog it starts
//! with: the requests waiting are added to the envelope's rate, drained over
//! `backlog_drain_s`. Cold starts per stage; conservative 30 s scale-down.

use morph_core::time::Seconds;
use serde::{Deserialize, Serialize};

use super::backlog_rate;
use crate::pipeline::{PoolConfig, PoolView, Sizer, StageTarget};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InferlineConfig {
    /// The longest envelope window.
    pub max_window_s: Seconds,
    /// Replicas asked on top, as a share (the equal-cost comparison's knob).
    pub headroom: f64,
    pub backlog_drain_s: Seconds,
    pub r_max: u32,
    pub pool: PoolConfig,
}

impl Default for InferlineConfig {
    fn default() -> Self {
        Self {
            max_window_s: Seconds(60.0),
            headroom: 0.0,
            backlog_drain_s: Seconds(10.0),
            r_max: 8,
            pool: PoolConfig::default(),
        }
    }
}

#[derive(Debug)]
pub struct InferlineSizer(pub InferlineConfig);

/// InferLine's rule: every stage at its current threads sized for the ingress envelope plus the
/// backlog drained over `drain_s`, times 1 + `headroom`, within [1, `r_max`] (QUART's robust
/// floor reuses it).
pub(crate) fn envelope_targets(
    view: &PoolView<'_>,
    max_window_s: f64,
    drain_s: f64,
    headroom: f64,
    r_max: u32,
) -> Vec<StageTarget> {
    let Some(ingress) = view.stages.first() else { return Vec::new() };
    let service: f64 = view.stages.iter().map(|s| s.service_s(s.threads)).sum();
    // Windows ΔT_k = T_s·2^k up to the longest; r_max = max_k arrivals(ΔT_k)/ΔT_k.
    let mut window = service.max(1e-3);
    let mut peak: f64 = 0.0;
    while window <= max_window_s {
        peak = peak.max(ingress.stats.rate_over(view.now, Seconds(window).nanos()));
        window *= 2.0;
    }
    let rate = (peak + backlog_rate(view, drain_s)) * (1.0 + headroom);
    view.stages
        .iter()
        .map(|s| {
            let replicas = (rate * s.service_s(s.threads)).ceil() as u32;
            StageTarget { replicas: replicas.clamp(1, r_max), threads: s.threads, key: false }
        })
        .collect()
}

impl Sizer for InferlineSizer {
    fn size(&mut self, view: &PoolView<'_>) -> Vec<StageTarget> {
        let c = &self.0;
        envelope_targets(view, c.max_window_s.0, c.backlog_drain_s.0, c.headroom, c.r_max)
    }

    fn describe(&self) -> serde_json::Value {
        serde_json::to_value(&self.0).unwrap_or_default()
    }
}
