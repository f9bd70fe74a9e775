//! The delay of a queue served by `r` replicas (a QUART stage, the instances of an Arlo runtime
//! that late binding pools): exact M/M/c (Erlang C), its Allen–Cunneen G/G/c correction, and
//! QUART's Eq. 1 as printed (for the paper-literal ablation).

use serde::{Deserialize, Serialize};

/// Which formula estimates a stage's delay T_i.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DelayModel {
    /// Exact M/M/c sojourn time (spec §1.4 [R]).
    ErlangC,
    /// M/M/c waiting scaled by (c_a² + c_s²)/2 (Allen–Cunneen), for near-deterministic service.
    AllenCunneen,
    /// QUART Eq. 1 as printed: P_0·λ / (r·μ·(μ − λ/r)) + 1/μ (not the M/M/c delay).
    PaperEq1,
}

/// What a delay estimate needs: arrival rate λ and one replica's service rate μ (req/s), the
/// replicas r, and the CVs of inter-arrival (c_a) and service (c_s) times.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Load {
    pub lambda: f64,
    pub mu: f64,
    pub replicas: u32,
    pub ca: f64,
    pub cs: f64,
}

/// The stage's delay (queueing plus service) in seconds; infinite when ρ = λ/(rμ) ≥ 1.
pub fn delay(model: DelayModel, load: Load) -> f64 {
    let Load { lambda, mu, replicas: r, ca, cs } = load;
    if mu <= 0.0 || r == 0 {
        return f64::INFINITY;
    }
    if lambda <= 0.0 {
        return 1.0 / mu;
    }
    let a = lambda / mu;
    let rho = a / f64::from(r);
    if rho >= 1.0 {
        return f64::INFINITY;
    }
    match model {
        DelayModel::ErlangC => erlang_c_wait(lambda, mu, r) + 1.0 / mu,
        DelayModel::AllenCunneen => erlang_c_wait(lambda, mu, r) * (ca * ca + cs * cs) / 2.0 + 1.0 / mu,
        // QUART Eq. 1: T_i = P_0·λ_i / (r_i·μ_i·(μ_i − λ_i/r_i)) + 1/μ_i
        DelayModel::PaperEq1 => {
            p0(a, r) * lambda / (f64::from(r) * mu * (mu - lambda / f64::from(r))) + 1.0 / mu
        }
    }
}

/// M/M/c mean waiting time W_q = C(r, a) / (rμ − λ).
fn erlang_c_wait(lambda: f64, mu: f64, r: u32) -> f64 {
    erlang_c(lambda, mu, r) / (f64::from(r) * mu - lambda)
}

/// Erlang C, the probability that an arrival to M/M/c waits (ρ < 1), from the stable Erlang-B
/// recursion B_k = a·B_{k−1} / (k + a·B_{k−1}), C = B_r / (1 − ρ(1 − B_r)).
fn erlang_c(lambda: f64, mu: f64, r: u32) -> f64 {
    let a = lambda / mu;
    let rho = a / f64::from(r);
    let b = (1..=r).fold(1.0, |b, k| a * b / (f64::from(k) + a * b));
    b / (1.0 - rho * (1.0 - b))
}

/// P_0, the probability that an M/M/c stage is empty (ρ < 1).
fn p0(a: f64, r: u32) -> f64 {
    let mut term = 1.0;
    let mut sum = 0.0;
    for k in 0..r {
        sum += term;
        term *= a / f64::from(k + 1);
    }
    // term = a^r / r!
    let rho = a / f64::from(r);
    1.0 / (sum + term / (1.0 - rho))
}

/// The fewest replicas, at least `floor`, whose delay is within `target` seconds (the
/// feed-forward rule r* = min{ r : T(λ, μ, r) ≤ T_target }); `cap` if none up to it is.
pub fn replicas_for(model: DelayModel, load: Load, target: f64, floor: u32, cap: u32) -> u32 {
    let mut r = floor.max(1);
    while r < cap && delay(model, Load { replicas: r, ..load }) > target {
        r += 1;
    }
    r.min(cap.max(floor.max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(lambda: f64, mu: f64, replicas: u32) -> Load {
        Load { lambda, mu, replicas, ca: 1.0, cs: 1.0 }
    }

    /// The spec's test vectors (§1.4): exact T and Eq. 1 as printed.
    #[test]
    fn erlang_c_and_eq1_match_the_spec_vectors() {
        let cases = [
            (5.0, 10.0, 1, 0.2000, 0.1500),
            (5.0, 10.0, 2, 0.1067, 0.1200),
            (10.0, 3.0, 4, 0.6622, 0.3689),
            (10.0, 3.0, 5, 0.3987, 0.3545),
            (20.0, 7.7, 4, 0.1626, 0.1456),
        ];
        for (lambda, mu, r, exact, paper) in cases {
            let got = delay(DelayModel::ErlangC, load(lambda, mu, r));
            assert!((got - exact).abs() < 5e-4, "λ {lambda} μ {mu} r {r}: {got} vs {exact}");
            let got = delay(DelayModel::PaperEq1, load(lambda, mu, r));
            assert!((got - paper).abs() < 5e-4, "Eq. 1 λ {lambda} μ {mu} r {r}: {got} vs {paper}");
        }
        for r in 1..=3 {
            assert_eq!(delay(DelayModel::ErlangC, load(10.0, 3.0, r)), f64::INFINITY);
            assert_eq!(delay(DelayModel::PaperEq1, load(10.0, 3.0, r)), f64::INFINITY);
        }
    }

    #[test]
    fn allen_cunneen_shrinks_waiting_for_regular_traffic_and_equals_erlang_c_at_cv_one() {
        let l = load(20.0, 7.7, 4);
        assert_eq!(delay(DelayModel::AllenCunneen, l), delay(DelayModel::ErlangC, l));
        let regular = Load { ca: 0.1, cs: 0.0, ..l };
        let service = 1.0 / 7.7;
        let t = delay(DelayModel::AllenCunneen, regular);
        assert!(t > service && t < service + 0.001, "{t}");
    }

    #[test]
    fn replicas_for_is_the_smallest_that_meets_the_target() {
        // λ 10, μ 3: 4 replicas give 0.662 s, 5 give 0.399 s.
        assert_eq!(replicas_for(DelayModel::ErlangC, load(10.0, 3.0, 1), 0.5, 1, 8), 5);
        assert_eq!(replicas_for(DelayModel::ErlangC, load(10.0, 3.0, 1), 0.7, 1, 8), 4);
        assert_eq!(replicas_for(DelayModel::ErlangC, load(10.0, 3.0, 1), 0.01, 1, 8), 8, "capped");
        assert_eq!(replicas_for(DelayModel::ErlangC, load(0.0, 3.0, 1), 0.5, 2, 8), 2, "floor");
    }
}
