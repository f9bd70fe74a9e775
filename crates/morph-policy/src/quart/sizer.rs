//! QUART's online loop (Fig. 4, Alg. 1): per control period, the corrector, then the smoother,
//! then the CPU compensator, over the stages' measured rates and CVs.

use morph_core::{Gauge, Nanos, Time, time::Millis};

use super::budget::{Budget, threads_to_fit};
use super::compensator::{Cut, compensate};
use super::config::{BurstRule, DelaySource, QuartConfig};
use super::corrector::{CorrectorParams, PidState, StageDelay, correct};
use super::critical::carry_critical_flow;
use super::qna::{StageFlow, arrival_cvs};
use super::smoother::{Smoothing, smooth};
use crate::pipeline::{PoolView, Sizer, StageTarget, StageView};
use crate::quart::baselines::inferline::envelope_targets;
use crate::queueing::{DelayModel, Load, delay, replicas_for};

/// The robust floor drains a backlog over this long, as the baselines do.
const ROBUST_DRAIN_S: f64 = 10.0;
/// The bins the ingress's dispersion is counted in.
const DISPERSION_BIN: Nanos = 1_000_000_000;

/// What the loop concluded for one stage at the last period (for gauges).
#[derive(Debug, Clone, Copy, Default)]
struct Estimate {
    target_s: f64,
    delay_s: f64,
    cv: f64,
    need: u32,
}

#[derive(Debug)]
pub struct QuartSizer {
    config: QuartConfig,
    pid: Vec<PidState>,
    key_until: Vec<Time>,
    estimates: Vec<Estimate>,
    /// The critical stage at the last period.
    critical: Option<usize>,
    /// Periods sized by the robust rule alone (the arrivals too bursty, the burst forecast off).
    fallbacks: u64,
    /// Periods sized by the burst forecast.
    burst_periods: u64,
    /// What sized the stages at the last period.
    last: Decider,
    /// The ingress's burst persistence at the last period (`StageStats::burst_persistence`).
    persistence: Option<f64>,
}

/// What sized QUART's stages in one period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Decider {
    /// QUART's queueing model on its mean-rate window (with the robust floor).
    #[default]
    Own,
    /// QUART's queueing model on the burst forecast.
    BurstForecast,
    /// The envelope rule alone.
    Fallback,
}

impl QuartSizer {
    pub fn new(config: QuartConfig) -> Self {
        Self {
            config,
            pid: Vec::new(),
            key_until: Vec::new(),
            estimates: Vec::new(),
            critical: None,
            fallbacks: 0,
            burst_periods: 0,
            last: Decider::Own,
            persistence: None,
        }
    }

    fn model(&self) -> DelayModel {
        if self.config.paper_literal { DelayModel::PaperEq1 } else { self.config.delay_model }
    }
}

/// What the loop knows of every stage this period, to size it at a thread count.
struct Loads<'v> {
    view: &'v PoolView<'v>,
    lambda: Vec<f64>,
    cvs: Vec<f64>,
    targets: Vec<f64>,
    /// c_s, the CV of a stage's service time.
    service_cv: f64,
}

impl Loads<'_> {
    /// Stage i's load at `threads` threads per replica, on `replicas` replicas.
    fn load(&self, i: usize, threads: u16, replicas: u32) -> Load {
        let mu = 1.0 / self.view.stages[i].service_s(threads);
        Load { lambda: self.lambda[i], mu, replicas, ca: self.cvs[i], cs: self.service_cv }
    }
}

impl QuartSizer {
    /// The base allocation at `threads`: each stage's fewest replicas within its target, then
    /// (unless paper-literal) raised to carry the critical stage's flow; with the critical stage.
    fn needs(&self, loads: &Loads<'_>, threads: &[u16]) -> (Vec<u32>, Option<usize>) {
        let c = &self.config;
        let stages = &loads.view.stages;
        let mut needs: Vec<u32> = (0..stages.len())
            .map(|i| {
                let load = loads.load(i, threads[i], stages[i].replicas());
                replicas_for(self.model(), load, loads.targets[i], c.r_min, c.r_max)
            })
            .collect();
        let mut critical = None;
        if c.critical_flow && !c.paper_literal {
            let service: Vec<f64> = (0..stages.len()).map(|i| stages[i].service_s(threads[i])).collect();
            critical = carry_critical_flow(&mut needs, &service, c.r_max);
        }
        (needs, critical)
    }
}

impl Sizer for QuartSizer {
    fn size(&mut self, view: &PoolView<'_>) -> Vec<StageTarget> {
        let c = self.config.clone();
        let n = view.stages.len();
        self.pid.resize(n, PidState::default());
        self.key_until.resize(n, Time::ZERO);
        let model = self.model();
        let slo = c.slo_ms.map_or(view.slo_s, Millis::secs);
        let service: Vec<f64> = view.stages.iter().map(|s| s.service_s(s.threads)).collect();
        let total: f64 = service.iter().sum();
        // T_target,i = SLO · s_i / Σ_j s_j (spec §1.4 [R]).
        let targets: Vec<f64> = service.iter().map(|s| slo * s / total.max(f64::MIN_POSITIVE)).collect();
        // Bursts that outlast the rate window (the ingress's dispersion over 1 s bins above
        // `fallback_dispersion`; Poisson is 1): QUART's burst forecast reads λ_i, or, without
        // it, the envelope rule sizes alone (below).
        let ingress = view.stages.first().map(|s| s.stats);
        let bursty = !c.paper_literal
            && c.robust_floor
            && ingress
                .and_then(|s| s.dispersion(view.now, DISPERSION_BIN))
                .is_some_and(|d| d > c.fallback_dispersion);
        // Whether those bursts last (an MMPP's states) or come and go within a bin; until a burst
        // has shown which, QUART's own forecast decides.
        self.persistence = ingress.and_then(|s| s.burst_persistence(view.now, c.burst.bin_s.nanos()));
        let forecast = match c.bursts {
            BurstRule::Forecast => bursty,
            BurstRule::Fallback => false,
            BurstRule::ByPersistence => bursty && self.persistence.is_none_or(|r| r >= c.burst.lasting),
        };
        let forecast = forecast.then_some(c.burst);
        let rate = |s: &StageView<'_>| match forecast {
            Some(f) => f.read(s.stats, view.now).rate,
            None => s.stats.rate(view.now),
        };
        // λ_i, plus (our extension) the requests queued at stage i drained over the horizon: a
        // burst counts where it waits, so the critical stage is the one that asks for replicas.
        let drain_s = forecast.map_or(c.backlog_drain_s, |f| f.drain_s).0;
        let drain = |q: usize| match drain_s > 0.0 && !c.paper_literal {
            true => q as f64 / drain_s,
            false => 0.0,
        };
        let lambda: Vec<f64> = view.stages.iter().map(|s| rate(s) + drain(s.queued)).collect();
        // The forecast reads the ingress as two states, each Poisson within itself (an MMPP):
        // the gaps' CV over both states is what it has already modelled, so QNA starts from 1.
        let measured_cv = |s: &StageView<'_>| s.stats.cv().filter(|_| forecast.is_none());
        let flows: Vec<StageFlow> = (0..n)
            .map(|i| StageFlow {
                rho: lambda[i] * service[i] / f64::from(view.stages[i].replicas()),
                replicas: view.stages[i].replicas(),
                cs: c.service_cv,
                measured: measured_cv(&view.stages[i]),
            })
            .collect();
        let ingress_cv = view.stages.first().and_then(measured_cv).map_or(1.0, |m| m.0);
        // ĈV_i: QNA from the ingress, measured where there are enough arrivals (Alg. 1 line 7).
        let cvs = arrival_cvs(ingress_cv, &flows, c.cv_enough);
        let loads = Loads { view, lambda, cvs, targets, service_cv: c.service_cv };
        // Under the burst forecast the stages stay at the pool's threads, as under the fallback:
        // a burst's need past the slots is shared out by the executor, not bought with threads
        // (8 threads serve a request in 0.74x the time for 8x the cores; re-threading in bursts
        // cost 1.01-1.34x the cores at 150 req/s, docs/quart.md).
        let rethread = c.compensator && forecast.is_none();
        let mut threads: Vec<u16> = match forecast {
            Some(_) => vec![c.pool.threads; n],
            None => view.stages.iter().map(|s| s.threads).collect(),
        };
        let (mut needs, mut critical) = self.needs(&loads, &threads);
        // The CPU compensator when the needs do not fit the slots (see [`super::budget`]).
        if rethread && !c.paper_literal {
            let most = threads.iter().copied().max().unwrap_or(1);
            let needs_at = |t: u16| self.needs(&loads, &vec![t; n]).0;
            let budget = Budget { slots: view.slots as u32, cores: view.cores.map(|c| c as u32) };
            if let Some(t) = threads_to_fit(most, &c.threads, budget, needs_at) {
                threads = vec![t; n];
                (needs, critical) = self.needs(&loads, &threads);
            }
        }
        // Morph's robust floor: no stage below the envelope rule's count at these threads; and
        // where the arrivals are too bursty for QUART's forecast, the envelope rule alone, at
        // the pool's static threads, as the baseline runs it.
        if c.robust_floor && !c.paper_literal {
            let at = |counts: &[u16]| PoolView {
                stages: view
                    .stages
                    .iter()
                    .zip(counts)
                    .map(|(s, &t)| StageView { threads: t, ..*s })
                    .collect(),
                ..*view
            };
            let envelope = |counts: &[u16]| {
                envelope_targets(&at(counts), c.robust_window_s.0, ROBUST_DRAIN_S, 0.0, c.r_max)
            };
            if bursty && forecast.is_none() {
                self.fallbacks += 1;
                self.last = Decider::Fallback;
                return envelope(&vec![c.pool.threads; n]);
            }
            // The floor holds a burst's replicas through the lulls; the burst forecast lets
            // them go and brings them back warm.
            if !bursty {
                for (need, floor) in needs.iter_mut().zip(envelope(&threads)) {
                    *need = (*need).max(floor.replicas);
                }
            }
        }
        self.burst_periods += u64::from(forecast.is_some());
        self.last = if forecast.is_some() { Decider::BurstForecast } else { Decider::Own };
        self.critical = critical;
        self.estimates.clear();
        let mut stage_delays: Vec<StageDelay> = Vec::with_capacity(n);
        for (i, &need) in needs.iter().enumerate() {
            let r = view.stages[i].replicas();
            let modelled = delay(model, loads.load(i, threads[i], r));
            let t = match c.delay_source {
                DelaySource::Model => modelled,
                DelaySource::Observed => view.stages[i].stats.observed_delay().unwrap_or(modelled),
            };
            let target = loads.targets[i];
            stage_delays.push(StageDelay { delay: t, target, replicas: r, need });
            self.estimates.push(Estimate { target_s: target, delay_s: t, cv: loads.cvs[i], need });
        }
        let params = CorrectorParams {
            gains: c.gains,
            dt: c.pool.period_s.0,
            r_min: c.r_min,
            r_max: c.r_max,
            r_total: view.slots as u32,
            pid: c.corrector,
            paper_sign: c.paper_literal,
        };
        // Corrector (Alg. 1 lines 1–5).
        let corrected = correct(&params, &mut self.pid, &stage_delays);
        let hold: Nanos = c.key_hold_s.nanos();
        for i in 0..n {
            if corrected.key[i] {
                self.key_until[i] = view.now + hold;
            }
        }
        // Smoother (Alg. 1 lines 6–13, Eq. 7).
        let smoothed = if c.smoother {
            let inputs: Vec<Smoothing> = (0..n)
                .map(|i| Smoothing { corrected: corrected.replicas[i], cv: loads.cvs[i], need: needs[i] })
                .collect();
            smooth(&inputs, c.r_min, c.paper_literal)
        } else {
            corrected.replicas.clone()
        };
        // CPU compensator (Alg. 1 lines 14–24) for stages the smoother cut.
        (0..n)
            .map(|i| {
                let stage = &view.stages[i];
                let mut out = StageTarget {
                    replicas: smoothed[i],
                    threads: threads[i],
                    key: self.key_until[i] > view.now,
                };
                if rethread && smoothed[i] < corrected.replicas[i] {
                    let cut = Cut {
                        time: stage.time,
                        hop_s: stage.hop_s,
                        lambda: loads.lambda[i],
                        ca: loads.cvs[i],
                        target: loads.targets[i],
                        threads: threads[i],
                        corrected: corrected.replicas[i],
                        smoothed: smoothed[i],
                    };
                    let done = compensate(model, cut, &c.threads);
                    out.replicas = done.replicas;
                    out.threads = done.threads;
                }
                out
            })
            .collect()
    }

    fn gauges(&self) -> Vec<Gauge> {
        let mut out = vec![
            Gauge::new(
                "quart_fallbacks_total",
                "QUART: control periods sized by the fallback rule.",
                self.fallbacks as f64,
            ),
            Gauge::new(
                "quart_burst_periods_total",
                "QUART: control periods sized by the burst forecast.",
                self.burst_periods as f64,
            ),
            // 0 or 1 each period: over a run their means are the shares of time each decided.
            Gauge::new(
                "quart_fallback_active",
                "QUART: 1 while the fallback rule sized the last period.",
                f64::from(u8::from(self.last == Decider::Fallback)),
            ),
            Gauge::new(
                "quart_burst_forecast_active",
                "QUART: 1 while the burst forecast sized the last period.",
                f64::from(u8::from(self.last == Decider::BurstForecast)),
            ),
        ];
        if let Some(r) = self.persistence {
            out.push(Gauge::new(
                "quart_burst_persistence",
                "QUART: how far a busy second predicts the next (its bursts' persistence).",
                r,
            ));
        }
        for (i, e) in self.estimates.iter().enumerate() {
            let g = |name: &str, help: &'static str, value: f64| {
                Gauge::new(name, help, value).label("stage", i.to_string())
            };
            out.push(g(
                "stage_target_delay_seconds",
                "QUART: the stage's share of the delay target.",
                e.target_s,
            ));
            if e.delay_s.is_finite() {
                let help = "QUART: the stage's queueing delay its model predicts (Eq. 7).";
                out.push(g("stage_estimated_delay_seconds", help, e.delay_s));
            }
            out.push(g("stage_predicted_cv", "QUART: the inter-arrival CV the stage is sized for.", e.cv));
            out.push(g(
                "stage_needed_replicas",
                "QUART: replicas the stage needs to meet its target.",
                f64::from(e.need),
            ));
            let critical = f64::from(u8::from(self.critical == Some(i)));
            out.push(g("stage_critical", "QUART: 1 for the critical stage.", critical));
        }
        out
    }

    fn describe(&self) -> serde_json::Value {
        serde_json::to_value(&self.config).unwrap_or_default()
    }
}
