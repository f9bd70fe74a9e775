//! The parameters of a [`super::FleetPolicy`], with the presets that make it Arlo or one of
//! Arlo's baselines (§5 "Compared schemes", §5.2.4).

use serde::{Deserialize, Serialize};

use super::scaling::ScalingConfig;
use crate::arlo::{DispatchParams, DispatchRule};

/// How the runtimes' max lengths are chosen (§3.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RuntimeSet {
    /// The paper's linear steps at the profile's staircase width (`count` even steps without one).
    Staircase,
    /// Bucket bounds by DP over the lengths of the first period, k at the knee (≤ `count`).
    Optimised,
    /// Exactly `max_lens` (empty: one runtime at the longest length, as ST).
    Explicit,
    /// One dynamic-shape runtime at the longest length (DT).
    Dynamic,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FleetConfig {
    pub runtime_set: RuntimeSet,
    /// Runtimes for `explicit`; ignored otherwise.
    pub max_lens: Vec<u32>,
    /// Runtimes for a profile without a staircase, and the most the optimised rule may use.
    pub runtimes: u32,
    /// Longest input served; default: the profile's longest length rounded up to a multiple of 8
    /// (a table profiled at 1, 5, …, 509 serves 512).
    pub max_len: Option<u32>,
    /// Rows per batch of every runtime (Arlo: 1).
    pub batch: u32,
    /// Re-allocate instances among runtimes from the observed lengths (Arlo's Runtime Scheduler).
    pub allocate: bool,
    /// Period of the Runtime Scheduler (120 s).
    pub period_s: f64,
    /// The first allocation, once some lengths are seen.
    pub first_allocation_s: f64,
    /// Replacements in flight at once; 0: a tenth of the instances (at least one).
    pub replace_batch: usize,
    pub dispatch: DispatchRule,
    /// λ, α and L of Algorithm 1.
    pub lambda: f64,
    pub alpha: f64,
    pub max_peek: usize,
    pub scaling: ScalingConfig,
    /// Most requests waiting over all instances; beyond it arrivals get `QueueFull`.
    pub max_queue: usize,
    /// SLO for M_i, L_i and target tracking; default: the deployment's.
    pub slo_ms: Option<f64>,
    /// Tick period for scaling checks and replacement progress.
    pub tick_s: f64,
}

impl Default for FleetConfig {
    /// Arlo with the paper's parameters.
    fn default() -> Self {
        let d = DispatchParams::default();
        Self {
            runtime_set: RuntimeSet::Staircase,
            max_lens: Vec::new(),
            runtimes: 8,
            max_len: None,
            batch: 1,
            allocate: true,
            period_s: 120.0,
            first_allocation_s: 10.0,
            replace_batch: 0,
            dispatch: DispatchRule::Arlo,
            lambda: d.lambda,
            alpha: d.alpha,
            max_peek: d.max_peek,
            scaling: ScalingConfig::default(),
            max_queue: 100_000,
            slo_ms: None,
            tick_s: 1.0,
        }
    }
}

/// Names of the presets [`FleetConfig::preset`] knows.
pub const PRESETS: [&str; 6] = ["arlo", "arlo-ilb", "arlo-ig", "st", "dt", "infaas"];

impl FleetConfig {
    /// The defaults of a named scheme, before the user's parameters are applied (scaling is off
    /// in all; Arlo's paper pairs itself with `target-tracking` and the baselines with `headroom`):
    /// - `arlo`: staircase runtimes, periodic allocation, Algorithm 1;
    /// - `arlo-ilb`, `arlo-ig`: Arlo with the ILB or IG dispatcher (Table 4 ablations);
    /// - `st`: one static runtime at the longest length, load balanced;
    /// - `dt`: one dynamic-shape runtime, load balanced;
    /// - `infaas`: the staircase variants split evenly (no length-aware allocation), first-fit
    ///   dispatch.
    pub fn preset(name: &str) -> Option<Self> {
        let arlo = Self::default();
        let baseline =
            |runtime_set, dispatch| Self { runtime_set, allocate: false, dispatch, ..Self::default() };
        Some(match name {
            "arlo" => arlo,
            "arlo-ilb" => Self { dispatch: DispatchRule::Ideal, ..arlo },
            "arlo-ig" => Self { dispatch: DispatchRule::Greedy, ..arlo },
            "st" => baseline(RuntimeSet::Explicit, DispatchRule::Greedy),
            "dt" => baseline(RuntimeSet::Dynamic, DispatchRule::Greedy),
            "infaas" => baseline(RuntimeSet::Staircase, DispatchRule::FirstFit),
            _ => return None,
        })
    }

    pub fn dispatch_params(&self) -> DispatchParams {
        DispatchParams { lambda: self.lambda, alpha: self.alpha, max_peek: self.max_peek }
    }
}
