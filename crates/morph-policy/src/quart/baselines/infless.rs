//! INFless-like (spec §2.5): whole-model replicas (no pipeline), cold starts only, scale-up by
//! capacity: as many instances as cover the window's rate at one instance's throughput, kept
//! alive for a minute (in place of INFless's idle-time histograms).

use serde::{Deserialize, Serialize};

use crate::pipeline::{PoolConfig, PoolView, Sizer, StageTarget};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InflessConfig {
    pub r_max: u32,
    pub pool: PoolConfig,
}

impl Default for InflessConfig {
    fn default() -> Self {
        let pool = PoolConfig { whole_model: true, scale_down_delay_s: 60.0, ..PoolConfig::default() };
        Self { r_max: 48, pool }
    }
}

#[derive(Debug)]
pub struct InflessSizer(pub InflessConfig);

impl Sizer for InflessSizer {
    fn size(&mut self, view: &PoolView<'_>) -> Vec<StageTarget> {
        view.stages
            .iter()
            .map(|s| {
                // Residual rate covered greedily by instances of RPS_max = 1/s at batch 1.
                let replicas = (s.stats.rate(view.now) * s.service_s(s.threads)).ceil() as u32;
                StageTarget { replicas: replicas.clamp(1, self.0.r_max), threads: s.threads, key: false }
            })
            .collect()
    }

    fn describe(&self) -> serde_json::Value {
        serde_json::to_value(&self.0).unwrap_or_default()
    }
}
