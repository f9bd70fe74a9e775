//! Uniform pipeline scaling (QUART §3.3's "scale the entire model uniformly"): every stage gets
//! the same count, enough for the slowest stage to run at a target utilisation at the window's
//! ingress rate. Cold starts per stage.

use serde::{Deserialize, Serialize};

use crate::pipeline::{PoolConfig, PoolView, Sizer, StageTarget};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UniformConfig {
    pub utilisation: f64,
    pub r_max: u32,
    pub pool: PoolConfig,
}

impl Default for UniformConfig {
    fn default() -> Self {
        Self { utilisation: 0.8, r_max: 8, pool: PoolConfig::default() }
    }
}

#[derive(Debug)]
pub struct UniformSizer(pub UniformConfig);

impl Sizer for UniformSizer {
    fn size(&mut self, view: &PoolView<'_>) -> Vec<StageTarget> {
        let Some(ingress) = view.stages.first() else { return Vec::new() };
        let slowest = view.stages.iter().map(|s| s.service_s(s.threads)).fold(0.0, f64::max);
        let replicas = (ingress.stats.rate(view.now) * slowest / self.0.utilisation.max(0.01)).ceil() as u32;
        let replicas = replicas.clamp(1, self.0.r_max);
        view.stages.iter().map(|s| StageTarget { replicas, threads: s.threads, key: false }).collect()
    }

    fn describe(&self) -> serde_json::Value {
        serde_json::to_value(&self.0).unwrap_or_default()
    }
}
