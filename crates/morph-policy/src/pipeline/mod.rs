//! Pipelines of stages with their own replicas (QUART's setting). One executor,
//! [`PipelinePolicy`], runs every pipeline policy: a FIFO queue per stage served by that stage's
//! idle replicas, hand-off to the next stage, and replicas launched, re-threaded and retired to
//! the counts a [`Sizer`] asks for each period. QUART and its baselines differ only in their
//! sizer (and their pool settings: whole model or stages, host cache or cold starts only).

pub mod placement;
mod pool;
#[cfg(test)]
mod pool_tests;
pub mod share;
pub mod stats;
mod warm_match;

use morph_core::time::{Millis, Seconds};
use morph_core::{Gauge, StageTime, Time};
use serde::{Deserialize, Serialize};

pub use placement::PlacementRule;
pub use pool::PipelinePolicy;
pub use stats::StageStats;

/// What a sizer wants of one stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct StageTarget {
    pub replicas: u32,
    pub threads: u16,
    /// A key (critical) stage: placed cache-aware and dispersed.
    pub key: bool,
}

/// One stage as a sizer sees it.
#[derive(Debug, Clone, Copy)]
pub struct StageView<'a> {
    pub stats: &'a StageStats,
    /// Replicas up, and launched but not yet up (at any thread count; `threads` is the one the
    /// stage is moving to).
    pub up: u32,
    pub starting: u32,
    pub threads: u16,
    pub queued: usize,
    /// s_i(C) per request, without the hop.
    pub time: StageTime,
    /// The hop that brings a request's activations in (0 at stage 0), seconds.
    pub hop_s: f64,
}

impl StageView<'_> {
    /// Seconds one request takes on a replica with `threads` threads (1/μ_i).
    pub fn service_s(&self, threads: u16) -> f64 {
        Millis(self.time.ms(threads)).secs() + self.hop_s
    }

    /// r_i: replicas up or starting, at least one.
    pub fn replicas(&self) -> u32 {
        (self.up + self.starting).max(1)
    }
}

/// The pipeline as a sizer sees it at a control period.
#[derive(Debug, Clone)]
pub struct PoolView<'a> {
    pub now: Time,
    pub stages: Vec<StageView<'a>>,
    /// Device slots of the whole cluster (R_total).
    pub slots: usize,
    /// Cores of the whole cluster, if bounded: Σ replicas × threads stays within them.
    pub cores: Option<usize>,
    /// The end-to-end latency SLO, seconds.
    pub slo_s: f64,
}

/// Decides each period how many replicas (and threads) every stage should have.
pub trait Sizer: Send + std::fmt::Debug {
    fn size(&mut self, view: &PoolView<'_>) -> Vec<StageTarget>;

    fn gauges(&self) -> Vec<Gauge> {
        Vec::new()
    }

    fn describe(&self) -> serde_json::Value;
}

/// How the executor runs a pipeline policy (every sizer's own defaults, overridable as `pool`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PoolConfig {
    /// Requests per batch (QUART: 1).
    pub max_batch: u32,
    /// Most requests waiting over all stages; beyond it arrivals get `QueueFull`.
    pub max_queue: usize,
    /// Replicas of every stage at start.
    pub initial_replicas: u32,
    /// Threads per replica at start.
    pub threads: u16,
    /// The control period.
    pub period_s: Seconds,
    /// A stage shrinks only to the largest count asked for over this long.
    pub scale_down_delay_s: Seconds,
    /// λ_i and observed delays over this window; arrival times kept for `history_s`.
    pub window_s: Seconds,
    pub history_s: Seconds,
    /// Inter-arrival gaps the CV is taken over.
    pub cv_window: usize,
    pub placement: PlacementRule,
    /// Slots kept free next to key stages (cache-aware placement).
    pub reserve: u16,
    /// New replicas may start from parameters kept in host memory (else always cold).
    pub host_cache: bool,
    /// With the host cache: every host with slots loads every stage's parameters into its
    /// memory from the start ([`morph_core::Action::Preload`], no slot held), so that a burst's
    /// launches start warm wherever a slot is free (Morph's extension of QUART §6.1).
    pub preload: bool,
    /// Every replica is the whole model (no stages).
    pub whole_model: bool,
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self {
            max_batch: 1,
            max_queue: 100_000,
            initial_replicas: 1,
            threads: 1,
            period_s: Seconds(1.0),
            scale_down_delay_s: Seconds(30.0),
            window_s: Seconds(10.0),
            history_s: Seconds(60.0),
            cv_window: 200,
            placement: PlacementRule::FirstFit,
            reserve: 1,
            host_cache: false,
            preload: false,
            whole_model: false,
        }
    }
}
