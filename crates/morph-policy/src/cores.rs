//! The core controller of a several-model server: QUART's critical stage one level up. An
//! application's models are the stages of its pipeline; they share one host's cores, which an
//! instance holds only while it computes (`morph_engine::cores`), earliest deadline first, a
//! computation's deadline being when it began to wait plus its model's *slack*. Each period the
//! controller reads what every model did (core-seconds held, computations run) and what waits
//! (requests queued, computations waiting for cores), finds the critical model — the one whose
//! backlog takes the largest share of its SLO to drain on every core (QUART §4.2: the stage
//! whose delay is furthest over its share of the SLO is scaled first) — and cuts its slack to a
//! sixteenth of its SLO, so that its computations take cores ahead of the others', which keep a
//! quarter of theirs.
//! Cores follow the load at the grain of one batch or decoder step; the decision is pure, so the
//! live server and the simulator make it alike.

use std::time::Duration;

use morph_core::ModelCores;
use morph_core::stats::smoothed;

/// What one model did up to now and what waits for it, as the controller reads it each period.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelReading {
    /// Core-seconds its computations have held since the start (a running sum).
    pub core_seconds: f64,
    /// Computations (batches, decoder steps) it has run since the start.
    pub computations: u64,
    /// Requests in its policy's queue plus computations waiting for cores, now.
    pub backlog: usize,
    /// Its latency SLO: a call's for an encoder, an output token's for a decoder.
    pub slo: Duration,
}

impl ModelReading {
    /// What a model's account in the host's core line and its policy's queue say now.
    pub fn of(account: &ModelCores, queued: usize, slo: Duration) -> Self {
        ModelReading {
            core_seconds: account.core_seconds,
            computations: account.grants,
            backlog: queued + account.waiting,
            slo,
        }
    }
}

/// Why the critical model changed.
#[derive(Debug, Clone, PartialEq)]
pub struct CoreMove {
    /// The model whose computations now go first (`None`: no model is critical).
    pub critical: Option<usize>,
    /// The one before.
    pub was: Option<usize>,
    /// What the controller saw, in words (the log line and the metric's `reason`).
    pub reason: MoveReason,
}

/// Why a model became critical, or stopped being.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoveReason {
    /// Its backlog takes more of its SLO to drain than any other's.
    Backlog,
    /// No backlog takes a noticeable share of its model's SLO any more.
    Drained,
}

impl MoveReason {
    pub fn label(self) -> &'static str {
        match self {
            MoveReason::Backlog => "backlog",
            MoveReason::Drained => "drained",
        }
    }
}

/// One period's decision.
#[derive(Debug, Clone, PartialEq)]
pub struct CoreDecision {
    /// Cores each model's computations held on average over the period.
    pub threads: Vec<f64>,
    /// Each model's slack for the next period.
    pub slack: Vec<Duration>,
    /// Each model's pressure: the share of its SLO its backlog takes to drain on every core.
    pub pressure: Vec<f64>,
    /// Set when the critical model changed.
    pub moved: Option<CoreMove>,
}

/// How often the controller reads and decides (the live server and the simulator alike).
pub const PERIOD: Duration = Duration::from_millis(250);

/// A model's slack when it is not critical, as a share of its SLO: its computations wait at
/// most this long for cores before a more relaxed model's later ones go first.
pub const SLACK_SHARE: f64 = 0.25;
/// The critical model's slack, as a share of its SLO: its computations go ahead of the others'
/// that began to wait up to (relaxed − critical) earlier, not of all of them (first place for
/// the last stage of a pipeline starves the stages before it).
pub const CRITICAL_SLACK_SHARE: f64 = SLACK_SHARE / 4.0;
/// The pressure a model needs to become critical.
pub const CRITICAL_PRESSURE: f64 = 0.25;
/// A challenger replaces the critical model only with this many times its pressure (so the
/// critical model does not flap between two loaded ones each period).
pub const HYSTERESIS: f64 = 1.5;
/// Weight of the newest period in each model's core-seconds per computation.
const SMOOTHING: f64 = 0.3;

/// The controller's memory between periods.
#[derive(Debug, Clone)]
pub struct CoreController {
    cores: f64,
    last: Vec<(f64, u64)>,
    /// Core-seconds per computation, smoothed.
    per_computation: Vec<Option<f64>>,
    critical: Option<usize>,
}

impl CoreController {
    /// A controller of `models` models sharing `cores` cores.
    pub fn new(models: usize, cores: u16) -> Self {
        Self {
            cores: f64::from(cores.max(1)),
            last: vec![(0.0, 0); models],
            per_computation: vec![None; models],
            critical: None,
        }
    }

    /// The model whose computations go first now.
    pub fn critical(&self) -> Option<usize> {
        self.critical
    }

    /// A model's slack by its SLO when it is not critical.
    pub fn relaxed_slack(slo: Duration) -> Duration {
        slo.mul_f64(SLACK_SHARE)
    }

    /// Reads one period of `period` and decides the next.
    pub fn decide(&mut self, period: Duration, readings: &[ModelReading]) -> CoreDecision {
        let seconds = period.as_secs_f64().max(f64::EPSILON);
        let mut threads = Vec::with_capacity(readings.len());
        let mut pressure = Vec::with_capacity(readings.len());
        for (m, reading) in readings.iter().enumerate() {
            let (held_before, ran_before) = self.last[m];
            let (held, ran) = (reading.core_seconds - held_before, reading.computations - ran_before);
            self.last[m] = (reading.core_seconds, reading.computations);
            threads.push(held / seconds);
            if ran > 0 {
                let now = held / ran as f64;
                self.per_computation[m] = Some(smoothed(self.per_computation[m], now, SMOOTHING));
            }
            // Little's law on the backlog: it drains in backlog × core-seconds each / cores.
            let drain = reading.backlog as f64 * self.per_computation[m].unwrap_or(0.0) / self.cores;
            pressure.push(drain / reading.slo.as_secs_f64().max(f64::EPSILON));
        }
        let moved = self.choose_critical(&pressure);
        let slack = readings
            .iter()
            .enumerate()
            .map(|(m, r)| match self.critical == Some(m) {
                true => r.slo.mul_f64(CRITICAL_SLACK_SHARE),
                false => Self::relaxed_slack(r.slo),
            })
            .collect();
        CoreDecision { threads, slack, pressure, moved }
    }

    /// The critical model by pressure, with hysteresis; the move when it changed.
    fn choose_critical(&mut self, pressure: &[f64]) -> Option<CoreMove> {
        let most = pressure
            .iter()
            .enumerate()
            .filter(|(_, p)| **p >= CRITICAL_PRESSURE)
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(m, p)| (m, *p));
        let was = self.critical;
        let next = match (was, most) {
            (_, None) => None,
            (Some(c), Some((m, p))) if m != c && pressure[c] >= CRITICAL_PRESSURE => {
                (p >= HYSTERESIS * pressure[c]).then_some(m).or(Some(c))
            }
            (_, Some((m, _))) => Some(m),
        };
        self.critical = next;
        (next != was).then(|| CoreMove {
            critical: next,
            was,
            reason: if next.is_some() { MoveReason::Backlog } else { MoveReason::Drained },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(core_seconds: f64, computations: u64, backlog: usize, slo_ms: u64) -> ModelReading {
        ModelReading { core_seconds, computations, backlog, slo: Duration::from_millis(slo_ms) }
    }

    #[test]
    fn the_model_whose_backlog_takes_most_of_its_slo_goes_first_and_lets_go_when_drained() {
        let mut c = CoreController::new(2, 2);
        // Model 0 held 1.5 cores over the period in 10 batches of 37.5 ms-cores; 40 wait against
        // an SLO of 500 ms: 40 × 37.5 ms / 2 cores = 750 ms, pressure 1.5. Model 1 is idle.
        let d = c.decide(PERIOD, &[reading(0.375, 10, 40, 500), reading(0.0, 0, 0, 100)]);
        assert_eq!(d.threads, vec![1.5, 0.0]);
        assert!((d.pressure[0] - 1.5).abs() < 1e-9, "{:?}", d.pressure);
        assert_eq!(d.slack, vec![Duration::from_micros(31_250), Duration::from_millis(25)]);
        assert_eq!(d.moved, Some(CoreMove { critical: Some(0), was: None, reason: MoveReason::Backlog }));
        // Still loaded: no move.
        let d = c.decide(PERIOD, &[reading(0.75, 20, 30, 500), reading(0.0, 0, 0, 100)]);
        assert_eq!(d.moved, None);
        // Drained: it lets go, and its slack is a quarter of its SLO again.
        let d = c.decide(PERIOD, &[reading(0.8, 22, 0, 500), reading(0.0, 0, 0, 100)]);
        assert_eq!(d.moved.map(|m| m.reason), Some(MoveReason::Drained));
        assert_eq!(d.slack[0], Duration::from_millis(125));
    }

    #[test]
    fn a_challenger_takes_over_only_well_past_the_critical_models_pressure() {
        let mut c = CoreController::new(2, 2);
        c.decide(PERIOD, &[reading(0.25, 10, 20, 500), reading(0.25, 10, 0, 500)]);
        assert_eq!(c.critical(), Some(0));
        // Model 1's pressure is a little above model 0's: model 0 stays critical.
        c.decide(PERIOD, &[reading(0.5, 20, 20, 500), reading(0.5, 20, 24, 500)]);
        assert_eq!(c.critical(), Some(0));
        // Twice model 0's: model 1 takes over.
        let d = c.decide(PERIOD, &[reading(0.75, 30, 20, 500), reading(0.75, 30, 40, 500)]);
        assert_eq!(c.critical(), Some(1));
        assert_eq!(d.moved.map(|m| (m.was, m.critical)), Some((Some(0), Some(1))));
        assert_eq!(d.slack, vec![Duration::from_millis(125), Duration::from_micros(31_250)]);
    }

    #[test]
    fn a_model_never_run_has_no_pressure_whatever_waits() {
        let mut c = CoreController::new(1, 2);
        let d = c.decide(PERIOD, &[reading(0.0, 0, 100, 100)]);
        assert_eq!(d.pressure, vec![0.0]);
        assert_eq!(d.moved, None);
    }
}
