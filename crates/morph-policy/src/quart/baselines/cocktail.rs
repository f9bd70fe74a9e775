//! Cocktail-like (spec §2.5): the ingress rate forecast one cold start ahead by Holt's
//! double-exponential smoothing, every stage provisioned for it with headroom:
//! r_i = ⌈(λ̂(t + h) + q/D)·(1 + headroom)·s_i⌉, q the requests waiting, drained over D =
//! `backlog_drain_s`. Cold starts per stage.

use morph_core::time::Seconds;
use serde::{Deserialize, Serialize};

use super::backlog_rate;
use crate::pipeline::{PoolConfig, PoolView, Sizer, StageTarget};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CocktailConfig {
    /// Holt's level and trend smoothing.
    pub alpha: f64,
    pub beta: f64,
    /// How far ahead to provision: the cold-start time h.
    pub horizon_s: Seconds,
    pub headroom: f64,
    pub backlog_drain_s: Seconds,
    pub r_max: u32,
    pub pool: PoolConfig,
}

impl Default for CocktailConfig {
    fn default() -> Self {
        Self {
            alpha: 0.5,
            beta: 0.3,
            horizon_s: Seconds(5.6),
            headroom: 0.1,
            backlog_drain_s: Seconds(10.0),
            r_max: 8,
            pool: PoolConfig::default(),
        }
    }
}

#[derive(Debug)]
pub struct CocktailSizer {
    config: CocktailConfig,
    /// Holt's level and trend (per period).
    state: Option<(f64, f64)>,
}

impl CocktailSizer {
    pub fn new(config: CocktailConfig) -> Self {
        Self { config, state: None }
    }
}

impl Sizer for CocktailSizer {
    fn size(&mut self, view: &PoolView<'_>) -> Vec<StageTarget> {
        let Some(ingress) = view.stages.first() else { return Vec::new() };
        let c = &self.config;
        // The rate over the last period is the observation Holt smooths.
        let period = Seconds(c.pool.period_s.0.max(1e-3));
        let observed = ingress.stats.rate_over(view.now, period.nanos());
        let (level, trend) = match self.state {
            None => (observed, 0.0),
            Some((l, t)) => {
                let level = c.alpha * observed + (1.0 - c.alpha) * (l + t);
                (level, c.beta * (level - l) + (1.0 - c.beta) * t)
            }
        };
        self.state = Some((level, trend));
        let forecast =
            (level + trend * c.horizon_s.0 / period.0).max(0.0) + backlog_rate(view, c.backlog_drain_s.0);
        view.stages
            .iter()
            .map(|s| {
                let replicas = (forecast * (1.0 + c.headroom) * s.service_s(s.threads)).ceil() as u32;
                StageTarget { replicas: replicas.clamp(1, c.r_max), threads: s.threads, key: false }
            })
            .collect()
    }

    fn describe(&self) -> serde_json::Value {
        serde_json::to_value(&self.config).unwrap_or_default()
    }
}
