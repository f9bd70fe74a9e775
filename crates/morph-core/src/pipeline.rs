//! A pipelined model's service times: each stage's time for one request by thread count, and
//! the cost of one activation hop between stages. Policies size stages from it (QUART's μ_i);
//! the simulator prices stage batches by it.

use serde::{Deserialize, Serialize};

use crate::runtime::RuntimeSpec;
use crate::unit::{ModelId, StageSpec, UnitSpec};

/// One stage's service time for one request on `C` threads, `s(C) = a + b/C`: `a` is what
/// more threads do not shorten, `b` what they divide (QUART §5.3's "linear regression",
/// made concrete as a regression in 1/C).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StageTime {
    pub a_ms: f64,
    pub b_ms: f64,
}

impl StageTime {
    /// A stage taking `ms` on one thread, of which `serial` (0..=1) does not parallelise.
    pub fn amdahl(ms: f64, serial: f64) -> Self {
        Self { a_ms: ms * serial, b_ms: ms * (1.0 - serial) }
    }

    /// The least-squares fit of `a + b/C` to measured `(threads, ms)` points; one point (or
    /// one thread count) gives `a = 0`, all of the time divided by threads.
    pub fn fit(points: &[(u16, f64)]) -> Option<Self> {
        let n = points.len() as f64;
        if points.is_empty() || points.iter().any(|&(c, ms)| c == 0 || ms.is_nan() || ms < 0.0) {
            return None;
        }
        let x = |c: u16| 1.0 / f64::from(c);
        let mean_x = points.iter().map(|p| x(p.0)).sum::<f64>() / n;
        let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
        let sxx: f64 = points.iter().map(|p| (x(p.0) - mean_x).powi(2)).sum();
        if sxx < 1e-12 {
            return Some(Self { a_ms: 0.0, b_ms: mean_y / mean_x });
        }
        let sxy: f64 = points.iter().map(|p| (x(p.0) - mean_x) * (p.1 - mean_y)).sum();
        let b = sxy / sxx;
        Some(Self { a_ms: mean_y - b * mean_x, b_ms: b })
    }

    /// Milliseconds for one request on `threads` threads.
    pub fn ms(&self, threads: u16) -> f64 {
        self.a_ms + self.b_ms / f64::from(threads.max(1))
    }
}

/// A model cut into stages that each run one request at a time, with the hop cost between them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageTimes {
    /// The shape each stage runs (its max length and batch).
    pub runtime: RuntimeSpec,
    /// Layers of the whole model, cut evenly into `stages.len()` stages.
    pub layers: u16,
    pub stages: Vec<StageTime>,
    /// Handing one request's activations to the next stage.
    pub hop_ms: f64,
}

impl StageTimes {
    pub fn stage_count(&self) -> u16 {
        self.stages.len() as u16
    }

    /// The unit of stage `index` on `threads` threads.
    pub fn stage_unit(&self, index: u16, threads: u16) -> UnitSpec {
        let stage = StageSpec::even(ModelId(0), index, self.stage_count(), self.layers);
        UnitSpec::batch(self.runtime).with_stage(stage).with_threads(threads)
    }

    /// The whole model in one instance on `threads` threads.
    pub fn whole_unit(&self, threads: u16) -> UnitSpec {
        UnitSpec::batch(self.runtime).with_threads(threads)
    }

    /// Milliseconds `unit` takes for one request: its stage's time plus the hop that brought
    /// the activations in (none at stage 0); the whole model is every stage with no hops.
    pub fn unit_ms(&self, unit: &UnitSpec) -> f64 {
        let threads = unit.threads.unwrap_or(1);
        match unit.stage {
            Some(s) => {
                let hop = if s.index > 0 { self.hop_ms } else { 0.0 };
                self.stages.get(usize::from(s.index)).map_or(0.0, |t| t.ms(threads)) + hop
            }
            None => self.stages.iter().map(|t| t.ms(threads)).sum(),
        }
    }

    /// The share of the model's layers `unit` holds (1 for the whole model).
    pub fn layer_share(&self, unit: &UnitSpec) -> f64 {
        unit.stage.map_or(1.0, |s| f64::from(s.end_layer - s.first_layer) / f64::from(self.layers.max(1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_recovers_a_plus_b_over_c() {
        let truth = StageTime { a_ms: 2.0, b_ms: 6.0 };
        let points: Vec<(u16, f64)> = [1, 2, 4, 8].iter().map(|&c| (c, truth.ms(c))).collect();
        let fit = StageTime::fit(&points).unwrap();
        assert!((fit.a_ms - 2.0).abs() < 1e-9 && (fit.b_ms - 6.0).abs() < 1e-9, "{fit:?}");
        assert_eq!(StageTime::fit(&[(1, 5.0)]), Some(StageTime { a_ms: 0.0, b_ms: 5.0 }));
        assert_eq!(StageTime::fit(&[(0, 5.0)]), None);
        assert_eq!(StageTime::fit(&[]), None);
    }

    #[test]
    fn units_cost_their_stage_plus_the_hop_in_and_the_whole_costs_every_stage() {
        let p = StageTimes {
            runtime: RuntimeSpec::fixed(128, 1),
            layers: 6,
            stages: vec![StageTime::amdahl(3.0, 0.0); 3],
            hop_ms: 0.5,
        };
        assert_eq!(p.unit_ms(&p.stage_unit(0, 1)), 3.0);
        assert_eq!(p.unit_ms(&p.stage_unit(2, 2)), 2.0);
        assert_eq!(p.unit_ms(&p.whole_unit(1)), 9.0);
        assert!((p.layer_share(&p.stage_unit(1, 1)) - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(p.stage_unit(2, 1).stage.unwrap().end_layer, 6);
    }
}
