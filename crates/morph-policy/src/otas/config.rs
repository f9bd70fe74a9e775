//! OTAS's parameters, with the paper's defaults (§V; spec §2.10), and the presets that run its
//! baselines on the same code.

use morph_core::time::Millis;
use std::collections::BTreeMap;

use morph_core::TokenPlan;
use serde::{Deserialize, Serialize};

use super::batching::BatchingConfig;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OtasConfig {
    /// L(γ): the token plans, fastest first and most accurate last. Each needs a latency profile
    /// (`plain`: the deployment's; others: a profile naming that plan).
    pub plans: Vec<TokenPlan>,
    /// Accuracy per task index, by plan: `{"merge:4": [0.86, 0.89, 0.97], "plain": [...]}`; a
    /// plan left out takes the deployment's profile (`morph train adapt`'s accuracy.json). A
    /// single-plan list needs none.
    pub accuracy: BTreeMap<TokenPlan, Vec<f64>>,
    /// Alg. 1's thresholds (δ, ε, η, μ).
    pub batching: BatchingConfig,
    /// β: with at most this many batches queued, Alg. 3 plans instead of the DP.
    pub beta: usize,
    /// The first milliseconds of service, planned by Alg. 3 only.
    pub initial_ms: Millis,
    /// κ: Alg. 3 gives the most accurate plan to batches of mean utility above it.
    pub kappa: f64,
    /// The window the arrival rate q is counted over (spec A8).
    pub rate_window_ms: Millis,
    /// The padded length at which each plan's throughput μ(γ) is read for f(q); `None` (the
    /// default): the length a full batch of the requests arriving now pads to.
    pub rate_len: Option<u32>,
    /// Whether Alg. 2 may skip a batch (`false`: every batch runs, the PetS-like rule).
    pub skip: bool,
    /// Morph's burst guard ([`super::guard`]): the batch about to start runs a slower plan than
    /// the fastest only if the queue and a burst as large as the most arrivals seen within one
    /// SLO over `burst_window_ms` keep their deadlines; off: the paper's planners alone.
    pub burst_guard: bool,
    pub burst_window_ms: Millis,
    /// The guard counts a burst's work as this many times its full batches' (Alg. 1 splits a
    /// burst by deadline and utility into more batches than full ones).
    pub burst_margin: f64,
    /// Most requests waiting; arrivals beyond it are rejected with `QueueFull`.
    pub max_queue: usize,
    /// The utility of a request that brings none.
    pub default_utility: f64,
    /// INFaaS-like model switching instead of per-batch plans (the baseline); `None` for OTAS.
    pub switching: Option<Switching>,
}

/// INFaaS-like switching among model variants (spec §2.12): one plan serves every batch, the
/// most accurate whose throughput exceeds the arrival rate; a new choice is taken once it has
/// held for `hold_ms`, and taking it blocks the engine for `cost_ms` (loading the variant).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Switching {
    pub hold_ms: Millis,
    pub cost_ms: Millis,
}

impl Default for OtasConfig {
    fn default() -> Self {
        Self {
            plans: vec![TokenPlan::Plain],
            accuracy: BTreeMap::new(),
            batching: BatchingConfig::default(),
            beta: 5,
            initial_ms: Millis(2_000.0),
            kappa: 0.8,
            rate_window_ms: Millis(1_000.0),
            rate_len: None,
            skip: true,
            burst_guard: true,
            burst_window_ms: Millis(30_000.0),
            burst_margin: 1.5,
            max_queue: 4_096,
            default_utility: 1.0,
            switching: None,
        }
    }
}

/// What INFaaS-like pays to switch variants: loading one from disk on this 2-core host, measured
/// as the wall time of a fresh `morph profile --plan P` of one tiny batch (process, ONNX
/// Runtime, weights, graph, session): 0.44–0.67 s for 3, 4 and 6 layers.
const SWITCH_COST: Millis = Millis(500.0);

impl OtasConfig {
    /// The OTAS policies by name (the registry's token-plan family): OTAS itself, OTAS planning
    /// only the plain model (its scheduling gain without the token gain), PetS-like (one fixed
    /// plan, every batch runs; with `plans: ["merge:3"]` it is fixed ToMe, with `["prompt:2"]`
    /// fixed prompts), and INFaaS-like (MiniLM cut to 3, 4 and 6 layers as model variants,
    /// switched by load).
    pub fn preset(name: &str) -> Option<Self> {
        let otas = Self::default();
        match name {
            "otas" | "otas-plain" => Some(otas),
            "pets-like" => Some(Self { skip: false, ..otas }),
            "infaas-like" => Some(Self {
                plans: vec![TokenPlan::Exit(3), TokenPlan::Exit(4), TokenPlan::Plain],
                skip: false,
                switching: Some(Switching { hold_ms: Millis(1_000.0), cost_ms: SWITCH_COST }),
                ..otas
            }),
            _ => None,
        }
    }

    /// Refuses what the policy cannot plan with, naming it.
    pub fn check(&self, name: &str) -> Result<(), String> {
        if self.plans.is_empty() {
            return Err("plans is empty".into());
        }
        if !matches!(name, "otas" | "infaas-like") && self.plans.len() != 1 {
            return Err(format!("{name} runs one fixed plan; plans has {}", self.plans.len()));
        }
        let b = &self.batching;
        if b.epsilon == 0 || b.delta_ms.0 < 0.0 || b.eta_ms.0 < 0.0 || b.mu < 0.0 {
            return Err("batching needs epsilon ≥ 1 and non-negative delta_ms, eta_ms, mu".into());
        }
        if self.rate_window_ms.0 <= 0.0 || self.rate_len == Some(0) || self.burst_window_ms.0 <= 0.0 {
            return Err("rate_window_ms, rate_len and burst_window_ms must be positive".into());
        }
        if self.burst_margin.is_nan() || self.burst_margin < 1.0 {
            return Err(format!("burst_margin must be at least 1, got {}", self.burst_margin));
        }
        Ok(())
    }
}
