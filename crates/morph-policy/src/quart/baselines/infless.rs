//! INFless-like (spec §2.5): whole-model replicas (no pipeline), cold starts only, scale-up by
//! INFless's capacity search (`ScaleUpFuncCapacity`): the residual rate λ − Σ RPS_max is covered
//! greedily by instances of the configuration that meets the SLO with the most throughput. Here
//! the executor offers one configuration (batch 1 for parity with QUART, the replica's threads),
//! so RPS_max = utilisation/s, the utilisation leaving INFless's headroom below the SLO's knee;
//! the rate counts the requests waiting, drained over `backlog_drain_s`, so the start-up
//! backlog of the first cold start is cleared. Instances are kept alive for a minute (in place
//! of INFless's idle-time histograms).

use morph_core::time::Seconds;
use serde::{Deserialize, Serialize};

use super::backlog_rate;
use crate::pipeline::{PoolConfig, PoolView, Sizer, StageTarget};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InflessConfig {
    /// The share of RPS_max an instance is planned at (INFless keeps a margin under the SLO).
    pub utilisation: f64,
    /// Replicas asked on top, as a share (the equal-cost comparison's knob).
    pub headroom: f64,
    pub backlog_drain_s: Seconds,
    pub r_max: u32,
    pub pool: PoolConfig,
}

impl Default for InflessConfig {
    fn default() -> Self {
        let pool =
            PoolConfig { whole_model: true, scale_down_delay_s: Seconds(60.0), ..PoolConfig::default() };
        Self { utilisation: 0.8, headroom: 0.0, backlog_drain_s: Seconds(10.0), r_max: 48, pool }
    }
}

#[derive(Debug)]
pub struct InflessSizer(pub InflessConfig);

impl Sizer for InflessSizer {
    fn size(&mut self, view: &PoolView<'_>) -> Vec<StageTarget> {
        let c = &self.0;
        let backlog = backlog_rate(view, c.backlog_drain_s.0);
        view.stages
            .iter()
            .map(|s| {
                // Residual rate covered by instances of RPS_max = utilisation / s at batch 1.
                let rps_max = c.utilisation.max(0.01) / s.service_s(s.threads);
                let rate = (s.stats.rate(view.now) + backlog) * (1.0 + c.headroom);
                let replicas = (rate / rps_max).ceil() as u32;
                StageTarget { replicas: replicas.clamp(1, c.r_max), threads: s.threads, key: false }
            })
            .collect()
    }

    fn describe(&self) -> serde_json::Value {
        serde_json::to_value(&self.0).unwrap_or_default()
    }
}
