//! QUART's online loop (Fig. 4, Alg. 1): per control period, the corrector, then the smoother,
//! then the CPU compensator, over the stages' measured rates and CVs.

use morph_core::{Gauge, Nanos, Time, time::ms_to_nanos};

use super::compensator::{Cut, CutBy, compensate};
use super::config::{DelaySource, QuartConfig};
use super::corrector::{CorrectorParams, PidState, StageDelay, correct};
use super::critical::carry_critical_flow;
use super::qna::{StageFlow, arrival_cvs};
use super::queueing::{DelayModel, Load, delay, replicas_for};
use super::smoother::{Smoothing, smooth};
use crate::pipeline::{PoolView, Sizer, StageTarget};

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
}

impl QuartSizer {
    pub fn new(config: QuartConfig) -> Self {
        Self { config, pid: Vec::new(), key_until: Vec::new(), estimates: Vec::new(), critical: None }
    }

    fn model(&self) -> DelayModel {
        if self.config.paper_literal { DelayModel::PaperEq1 } else { self.config.delay_model }
    }
}

impl Sizer for QuartSizer {
    fn size(&mut self, view: &PoolView<'_>) -> Vec<StageTarget> {
        let c = &self.config;
        let n = view.stages.len();
        self.pid.resize(n, PidState::default());
        self.key_until.resize(n, Time::ZERO);
        let model = self.model();
        let slo = c.slo_ms.map_or(view.slo_s, |ms| ms / 1e3);
        let service: Vec<f64> = view.stages.iter().map(|s| s.service_s(s.threads)).collect();
        let total: f64 = service.iter().sum();
        // T_target,i = SLO · s_i / Σ_j s_j (spec §1.4 [R]).
        let targets: Vec<f64> = service.iter().map(|s| slo * s / total.max(f64::MIN_POSITIVE)).collect();
        // λ_i, plus (our extension) the requests queued at stage i drained over the horizon: a
        // burst counts where it waits, so the critical stage is the one that asks for replicas.
        let drain = |q: usize| match c.backlog_drain_s > 0.0 && !c.paper_literal {
            true => q as f64 / c.backlog_drain_s,
            false => 0.0,
        };
        let lambda: Vec<f64> = view.stages.iter().map(|s| s.stats.rate(view.now) + drain(s.queued)).collect();
        let flows: Vec<StageFlow> = (0..n)
            .map(|i| StageFlow {
                rho: lambda[i] * service[i] / f64::from(view.stages[i].replicas()),
                replicas: view.stages[i].replicas(),
                cs: c.service_cv,
                measured: view.stages[i].stats.cv(),
            })
            .collect();
        let ingress_cv = view.stages.first().and_then(|s| s.stats.cv()).map_or(1.0, |m| m.0);
        // ĈV_i: QNA from the ingress, measured where there are enough arrivals (Alg. 1 line 7).
        let cvs = arrival_cvs(ingress_cv, &flows, c.cv_enough);
        let load = |i: usize, replicas: u32| Load {
            lambda: lambda[i],
            mu: 1.0 / service[i],
            replicas,
            ca: cvs[i],
            cs: c.service_cv,
        };
        let mut stage_delays: Vec<StageDelay> = Vec::with_capacity(n);
        self.estimates.clear();
        for i in 0..n {
            let r = view.stages[i].replicas();
            let need = replicas_for(model, load(i, r), targets[i], c.r_min, c.r_max);
            let modelled = delay(model, load(i, r));
            let t = match c.delay_source {
                DelaySource::Model => modelled,
                DelaySource::Observed => view.stages[i].stats.observed_delay().unwrap_or(modelled),
            };
            stage_delays.push(StageDelay { delay: t, target: targets[i], replicas: r, need });
            self.estimates.push(Estimate { target_s: targets[i], delay_s: t, cv: cvs[i], need });
        }
        if c.critical_flow && !c.paper_literal {
            let mut needs: Vec<u32> = stage_delays.iter().map(|d| d.need).collect();
            self.critical = carry_critical_flow(&mut needs, &service, c.r_max);
            for ((d, e), need) in stage_delays.iter_mut().zip(&mut self.estimates).zip(needs) {
                d.need = need;
                e.need = need;
            }
        }
        let params = CorrectorParams {
            gains: c.gains,
            dt: c.pool.period_s,
            r_min: c.r_min,
            r_max: c.r_max,
            r_total: view.slots as u32,
            pid: c.corrector,
            paper_sign: c.paper_literal,
        };
        // Corrector (Alg. 1 lines 1–5).
        let corrected = correct(&params, &mut self.pid, &stage_delays);
        let hold: Nanos = ms_to_nanos(c.key_hold_s * 1e3);
        for i in 0..n {
            if corrected.key[i] {
                self.key_until[i] = view.now + hold;
            }
        }
        // Smoother (Alg. 1 lines 6–13, Eq. 7).
        let smoothed = if c.smoother {
            let inputs: Vec<Smoothing> = (0..n)
                .map(|i| Smoothing {
                    corrected: corrected.replicas[i],
                    cv: cvs[i],
                    need: stage_delays[i].need,
                })
                .collect();
            smooth(&inputs, c.r_min, c.paper_literal)
        } else {
            corrected.replicas.clone()
        };
        // CPU compensator (Alg. 1 lines 14–24) for stages the smoother cut, and (our extension)
        // for those the slot budget left short of what they need.
        (0..n)
            .map(|i| {
                let stage = &view.stages[i];
                let kept = smoothed[i];
                let by = if kept < corrected.replicas[i] {
                    Some(CutBy::Smoother { corrected: corrected.replicas[i] })
                } else {
                    (kept < stage_delays[i].need).then_some(CutBy::Budget)
                };
                let key = self.key_until[i] > view.now;
                match by.filter(|_| c.compensator) {
                    Some(by) => {
                        let cut = Cut {
                            time: stage.time,
                            hop_s: stage.hop_s,
                            lambda: lambda[i],
                            ca: cvs[i],
                            target: targets[i],
                            threads: stage.threads,
                            kept,
                            by,
                        };
                        let done = compensate(model, cut, &c.threads);
                        StageTarget { replicas: done.replicas, threads: done.threads, key }
                    }
                    None => StageTarget { replicas: kept, threads: stage.threads, key },
                }
            })
            .collect()
    }

    fn gauges(&self) -> Vec<Gauge> {
        let mut out = Vec::new();
        for (i, e) in self.estimates.iter().enumerate() {
            let g = |name: &str, value: f64| Gauge::new(name, value).label("stage", i.to_string());
            out.push(g("stage_target_delay_seconds", e.target_s));
            if e.delay_s.is_finite() {
                out.push(g("stage_estimated_delay_seconds", e.delay_s));
            }
            out.push(g("stage_predicted_cv", e.cv));
            out.push(g("stage_needed_replicas", f64::from(e.need)));
            out.push(g("stage_critical", f64::from(u8::from(self.critical == Some(i)))));
        }
        out
    }

    fn describe(&self) -> serde_json::Value {
        serde_json::to_value(&self.config).unwrap_or_default()
    }
}
