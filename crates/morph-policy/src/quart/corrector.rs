//! QUART's replica corrector (§5.1, Eq. 2–3, Alg. 1 lines 1–5): stages whose delay T_i exceeds
//! their target are key stages, and a PID on the normalised error adds replicas to them.
//!
//! Every stage first gets its base allocation, the fewest replicas queueing says meet its
//! target (spec §1.3's "calculated based on QPS", made concrete). Key stages then get the PID's
//! Δr on top of what they run now. The paper's error sign (e = T_target − T_i) would remove
//! replicas from an overloaded stage; the default uses e = (T_i − T_target)/T_target and only
//! adds, `paper_sign` keeps the printed form for the ablation.

use serde::{Deserialize, Serialize};

use crate::pipeline::share::share_slots;

/// PID gains on the normalised error, per second (spec §1.4 [R]: the authors' 2.0/0.3/0.1).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gains {
    pub kp: f64,
    pub ki: f64,
    pub kd: f64,
}

impl Default for Gains {
    fn default() -> Self {
        Self { kp: 2.0, ki: 0.3, kd: 0.1 }
    }
}

/// One stage's PID memory.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PidState {
    integral: f64,
    previous: Option<f64>,
}

/// What the corrector knows of a stage this cycle.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StageDelay {
    /// T_i at the replicas it runs now (seconds; infinite when saturated).
    pub delay: f64,
    /// T_target,i (seconds).
    pub target: f64,
    /// r_i: replicas it runs now (up and starting).
    pub replicas: u32,
    /// The base allocation: the fewest replicas that meet the target by queueing theory.
    pub need: u32,
}

/// An infinite delay counts as this normalised error (so Δr stays finite).
const MAX_ERROR: f64 = 10.0;

/// The corrected counts ŷ_i; `key[i]` says whether stage i was over its target.
#[derive(Debug, Clone, PartialEq)]
pub struct Correction {
    pub replicas: Vec<u32>,
    pub key: Vec<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CorrectorParams {
    pub gains: Gains,
    /// Control period dt (seconds).
    pub dt: f64,
    pub r_min: u32,
    pub r_max: u32,
    /// Replicas all stages may hold together (R_total).
    pub r_total: u32,
    /// Off: the feed-forward ablation (base allocation only).
    pub pid: bool,
    /// The paper's error sign and rounding (the ablation).
    pub paper_sign: bool,
}

/// QUART Alg. 1 lines 1–5 over every stage. Grants go to the most-over-target stages first
/// while Σ r ≤ R_total; a stage at r_max or denied by the budget freezes its integral
/// (anti-windup); one back within target resets it.
pub fn correct(p: &CorrectorParams, states: &mut [PidState], stages: &[StageDelay]) -> Correction {
    let base: Vec<u32> = stages.iter().map(|s| s.need.clamp(p.r_min, p.r_max)).collect();
    let mut replicas = base.clone();
    let key: Vec<bool> = stages.iter().map(|s| s.delay > s.target).collect();
    let mut order: Vec<usize> = (0..stages.len()).filter(|&i| key[i]).collect();
    order.sort_by(|&a, &b| {
        let over = |s: &StageDelay| (s.delay - s.target).min(f64::MAX);
        over(&stages[b]).total_cmp(&over(&stages[a])).then(a.cmp(&b))
    });
    for (state, _) in states.iter_mut().zip(&key).filter(|(_, k)| !**k) {
        *state = PidState::default();
    }
    if !p.pid {
        return fit_budget(p, replicas, &base, key, &order);
    }
    for &i in &order {
        let s = stages[i];
        // e(t): normalised and positive when over target (Alg. 1 line 2 with the sign fixed);
        // the paper's T_target − T_i in seconds for the ablation.
        let error = if p.paper_sign {
            (s.target - s.delay).max(-MAX_ERROR * s.target)
        } else {
            ((s.delay - s.target) / s.target).min(MAX_ERROR)
        };
        let state = &mut states[i];
        let derivative = state.previous.map_or(0.0, |e| (error - e) / p.dt);
        let saturated = s.replicas >= p.r_max;
        if !saturated {
            state.integral += error * p.dt;
        }
        state.previous = Some(error);
        // Eq. 3: Δr = K_p·e + K_i·∫e dt + K_d·de/dt
        let delta = p.gains.kp * error + p.gains.ki * state.integral + p.gains.kd * derivative;
        // Eq. 2: r' = r + Δr, only adding (the paper-literal form rounds and may remove).
        let corrected = if p.paper_sign {
            (f64::from(s.replicas) + delta).round().max(0.0) as u32
        } else {
            s.replicas + delta.max(0.0).ceil() as u32
        };
        replicas[i] = if p.paper_sign {
            corrected.clamp(p.r_min, p.r_max)
        } else {
            corrected.max(replicas[i]).min(p.r_max)
        };
    }
    let corrected = fit_budget(p, replicas, &base, key, &order);
    for (i, (state, s)) in states.iter_mut().zip(stages).enumerate() {
        if corrected.replicas[i] < s.replicas.max(s.need) && corrected.key[i] {
            // Denied by the budget: do not wind up.
            state.integral = 0.0;
        }
    }
    corrected
}

/// Trims the counts to Σ ≤ R_total: first the PID's grants above the base allocations, from
/// non-key stages and then the least-over-target key stages; then, if the bases alone do not
/// fit, shares of R_total in proportion to the bases (never below r_min).
fn fit_budget(
    p: &CorrectorParams,
    mut replicas: Vec<u32>,
    base: &[u32],
    key: Vec<bool>,
    order: &[usize],
) -> Correction {
    let mut excess = replicas.iter().sum::<u32>().saturating_sub(p.r_total);
    let non_key = (0..replicas.len()).filter(|&i| !key[i]);
    let trim_order: Vec<usize> = non_key.chain(order.iter().rev().copied()).collect();
    for i in trim_order {
        let spare = replicas[i].saturating_sub(base[i].max(p.r_min)).min(excess);
        replicas[i] -= spare;
        excess -= spare;
    }
    if excess > 0 {
        // The bases alone do not fit: the slots shared by need (no stage starved by index).
        replicas = share_slots(&replicas, p.r_total, p.r_min);
    }
    Correction { replicas, key }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> CorrectorParams {
        CorrectorParams {
            gains: Gains::default(),
            dt: 1.0,
            r_min: 1,
            r_max: 8,
            r_total: 100,
            pid: true,
            paper_sign: false,
        }
    }

    fn stage(delay: f64, replicas: u32, need: u32) -> StageDelay {
        StageDelay { delay, target: 0.5, replicas, need }
    }

    #[test]
    fn an_overloaded_stage_gains_replicas_and_one_within_target_gets_its_base() {
        let mut states = vec![PidState::default(); 2];
        let c = correct(&params(), &mut states, &[stage(0.8, 3, 3), stage(0.2, 4, 2)]);
        // e = 0.6: Δr = 2·0.6 + 0.3·0.6 = 1.38 → +2.
        assert_eq!(c.replicas, vec![5, 2]);
        assert_eq!(c.key, vec![true, false]);
    }

    #[test]
    fn the_paper_sign_removes_replicas_from_an_overloaded_stage() {
        let mut states = vec![PidState::default()];
        let literal = CorrectorParams { paper_sign: true, ..params() };
        // The spec reproduced the authors' controller: target 0.5 s, latency 0.8 s, 3 → 1.
        let c = correct(&literal, &mut states, &[stage(0.8, 3, 1)]);
        assert!(c.replicas[0] < 3, "{:?}", c.replicas);
    }

    #[test]
    fn anti_windup_freezes_the_integral_at_r_max_and_resets_within_target() {
        let p = params();
        let mut states = vec![PidState::default()];
        for _ in 0..5 {
            correct(&p, &mut states, &[stage(1.0, 8, 8)]);
        }
        assert_eq!(states[0].integral, 0.0, "at r_max the integral does not grow");
        correct(&p, &mut states, &[stage(1.0, 4, 4)]);
        correct(&p, &mut states, &[stage(1.0, 4, 4)]);
        assert!(states[0].integral > 1.9);
        correct(&p, &mut states, &[stage(0.4, 4, 4)]);
        assert_eq!(states[0], PidState::default());
    }

    #[test]
    fn bounds_and_the_budget_favour_the_most_overloaded_stage() {
        let p = CorrectorParams { r_total: 6, ..params() };
        let mut states = vec![PidState::default(); 3];
        let c = correct(&p, &mut states, &[stage(0.6, 2, 2), stage(f64::INFINITY, 2, 3), stage(0.3, 2, 1)]);
        assert_eq!(
            c.replicas,
            vec![2, 3, 1],
            "grants above the bases go first, the most-over stage keeps its base"
        );
        let p = CorrectorParams { r_total: 7, ..params() };
        let mut states = vec![PidState::default(); 3];
        let c = correct(&p, &mut states, &[stage(0.6, 2, 2), stage(f64::INFINITY, 2, 3), stage(0.3, 2, 1)]);
        assert_eq!(c.replicas, vec![2, 4, 1], "the spare slot goes to the most-over-target stage");
        let starved = [stage(f64::INFINITY, 1, 4), stage(f64::INFINITY, 1, 4), stage(f64::INFINITY, 1, 4)];
        let c = correct(&CorrectorParams { r_total: 6, ..params() }, &mut [PidState::default(); 3], &starved);
        assert_eq!(c.replicas, vec![2, 2, 2], "bases that do not fit are cut evenly");
        let c = correct(&params(), &mut [PidState::default()], &[stage(f64::INFINITY, 7, 7)]);
        assert_eq!(c.replicas, vec![8], "never above r_max");
    }

    #[test]
    fn feed_forward_gives_the_base_allocation_only() {
        let p = CorrectorParams { pid: false, ..params() };
        let mut states = vec![PidState::default()];
        let c = correct(&p, &mut states, &[stage(5.0, 2, 3)]);
        assert_eq!(c.replicas, vec![3]);
        assert_eq!(c.key, vec![true]);
    }
}
