//! InferLine-like (spec §2.5): every stage sized from the ingress traffic envelope, blind to how
//! burstiness changes along the pipeline. The envelope's rate is the largest arrival rate over
//! windows from the pipeline's service time doubling up to 60 s; stage m gets
//! ⌈r_max · s_m⌉ replicas. Cold starts per stage; conservative 30 s scale-down.

use serde::{Deserialize, Serialize};

use morph_core::time::ms_to_nanos;

use crate::pipeline::{PoolConfig, PoolView, Sizer, StageTarget};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InferlineConfig {
    /// The longest envelope window.
    pub max_window_s: f64,
    pub r_max: u32,
    pub pool: PoolConfig,
}

impl Default for InferlineConfig {
    fn default() -> Self {
        Self { max_window_s: 60.0, r_max: 8, pool: PoolConfig::default() }
    }
}

#[derive(Debug)]
pub struct InferlineSizer(pub InferlineConfig);

impl Sizer for InferlineSizer {
    fn size(&mut self, view: &PoolView<'_>) -> Vec<StageTarget> {
        let Some(ingress) = view.stages.first() else { return Vec::new() };
        let service: f64 = view.stages.iter().map(|s| s.service_s(s.threads)).sum();
        // Windows ΔT_k = T_s·2^k up to the longest; r_max = max_k arrivals(ΔT_k)/ΔT_k.
        let mut window = service.max(1e-3);
        let mut peak: f64 = 0.0;
        while window <= self.0.max_window_s {
            peak = peak.max(ingress.stats.rate_over(view.now, ms_to_nanos(window * 1e3)));
            window *= 2.0;
        }
        view.stages
            .iter()
            .map(|s| {
                let replicas = (peak * s.service_s(s.threads)).ceil() as u32;
                StageTarget { replicas: replicas.clamp(1, self.0.r_max), threads: s.threads, key: false }
            })
            .collect()
    }

    fn describe(&self) -> serde_json::Value {
        serde_json::to_value(&self.0).unwrap_or_default()
    }
}
