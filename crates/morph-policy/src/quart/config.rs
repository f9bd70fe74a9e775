//! Every QUART parameter in one place (spec §5.4), settable from scenarios and
//! `--policy-params`; the switches are the ablations the paper lacks.

use morph_core::time::{Millis, Seconds};
use serde::{Deserialize, Serialize};

use super::burst::BurstForecast;
use super::corrector::Gains;
use crate::pipeline::{PlacementRule, PoolConfig};
use crate::queueing::DelayModel;

/// Where the corrector's T_i comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DelaySource {
    /// The delay model at the measured λ_i (the paper).
    Model,
    /// The mean delay requests spent at the stage over the window (the authors' code).
    Observed,
}

/// What sizes QUART's stages where the arrivals are too bursty for its mean-rate window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BurstRule {
    /// QUART's own burst forecast ([`super::burst`]), without the robust floor, at the pool's
    /// threads.
    Forecast,
    /// InferLine's envelope rule alone, at the pool's threads.
    Fallback,
    /// The default: the forecast where the bursts last (a busy second followed by another,
    /// [`BurstForecast::lasting`]) or have not yet shown whether they do, the envelope rule
    /// where they come and go within a second.
    ByPersistence,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QuartConfig {
    /// End-to-end SLO split over the stages in proportion to their service times; default:
    /// the deployment's.
    pub slo_ms: Option<Millis>,
    pub delay_model: DelayModel,
    pub delay_source: DelaySource,
    pub gains: Gains,
    pub r_min: u32,
    pub r_max: u32,
    /// A stage stays key this long after it last exceeded its target.
    pub key_hold_s: Seconds,
    /// A stage's measured CV replaces QNA's prediction once it rests on this many gaps.
    pub cv_enough: usize,
    /// CV of a stage's service time (0: deterministic, as for fixed-shape stages).
    pub service_cv: f64,
    /// Threads a replica may run with (CPU_max is the largest).
    pub threads: Vec<u16>,
    /// Every stage provisioned for the flow of the critical stage (see [`super::critical`]);
    /// off: each stage for its own need only, as the paper sizes.
    pub critical_flow: bool,
    /// The PID on top of the base allocation (off: the feed-forward ablation).
    pub corrector: bool,
    pub smoother: bool,
    pub compensator: bool,
    /// QUART as printed: Eq. 1, the PID's error sign, Eq. 7 unclamped.
    pub paper_literal: bool,
    /// Morph's extension: a stage is sized for its arrival rate plus the requests queued at it,
    /// drained over this many seconds (the critical flow carries a burst on to the later
    /// stages). 0: the arrival rate alone, as the paper sizes.
    pub backlog_drain_s: Seconds,
    /// Morph's robust floor: no stage below what InferLine's envelope rule asks of it (the
    /// largest arrival rate over windows up to `robust_window_s`, its backlog drained over
    /// 10 s), so where QUART's mean-rate forecast cannot see a burst coming it sizes as the
    /// robust baseline does rather than lose to it; off: QUART's own sizing alone.
    pub robust_floor: bool,
    pub robust_window_s: Seconds,
    /// Where QUART's mean-rate window cannot help: when the ingress's index of dispersion over
    /// 1 s bins (1 for Poisson) exceeds this, the bursts outlast the window its queueing model
    /// reads, and `bursts` says what sizes the stages instead.
    pub fallback_dispersion: f64,
    /// What sizes the stages where the arrivals are that bursty: QUART's burst forecast where
    /// the bursts last and the envelope rule where they do not (the default), or either alone.
    pub bursts: BurstRule,
    /// The burst forecast's settings.
    pub burst: BurstForecast,
    pub pool: PoolConfig,
}

impl Default for QuartConfig {
    fn default() -> Self {
        Self {
            slo_ms: None,
            delay_model: DelayModel::AllenCunneen,
            delay_source: DelaySource::Model,
            gains: Gains::default(),
            r_min: 1,
            r_max: 8,
            key_hold_s: Seconds(60.0),
            cv_enough: 200,
            service_cv: 0.0,
            threads: vec![1, 2, 4, 8],
            critical_flow: true,
            corrector: true,
            smoother: true,
            compensator: true,
            paper_literal: false,
            backlog_drain_s: Seconds(1.0),
            robust_floor: true,
            robust_window_s: Seconds(60.0),
            fallback_dispersion: 2.0,
            bursts: BurstRule::ByPersistence,
            burst: BurstForecast::default(),
            pool: PoolConfig {
                placement: PlacementRule::CacheAware,
                host_cache: true,
                preload: true,
                ..PoolConfig::default()
            },
        }
    }
}
