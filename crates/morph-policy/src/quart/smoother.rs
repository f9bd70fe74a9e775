//! QUART's pipeline-stage smoother (§5.2, Eq. 7, Alg. 1 lines 6–13): each stage's corrected
//! count is pulled towards its neighbours' mean, weighted by a buffering coefficient of its CV,
//! so a stage keeps more of a PID's grant the burstier its arrivals. It only takes back, and
//! never below what queueing says the stage needs (spec §1.5 [R]); `paper_literal` keeps the
//! printed rule, which may also raise a stage towards larger neighbours.

/// β(CV) = 0.5 + 0.5·sigmoid(CV − 1) (the authors' code; the paper gives no form).
pub fn beta(cv: f64) -> f64 {
    0.5 + 0.5 / (1.0 + (-(cv - 1.0)).exp())
}

/// One stage's inputs: ŷ_i from the corrector, its predicted arrival CV, and r_need,i.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Smoothing {
    pub corrected: u32,
    pub cv: f64,
    pub need: u32,
}

/// The smoothed counts r'_i for a chain of stages (neighbours: the previous and next stage).
pub fn smooth(stages: &[Smoothing], r_min: u32, paper_literal: bool) -> Vec<u32> {
    let n = stages.len();
    (0..n)
        .map(|i| {
            let neighbours: Vec<f64> = [i.checked_sub(1), (i + 1 < n).then_some(i + 1)]
                .into_iter()
                .flatten()
                .map(|j| f64::from(stages[j].corrected))
                .collect();
            let own = f64::from(stages[i].corrected);
            if neighbours.is_empty() {
                return stages[i].corrected.max(r_min);
            }
            let mean = neighbours.iter().sum::<f64>() / neighbours.len() as f64;
            let b = beta(stages[i].cv);
            // Eq. 7: y'_i = β(CV_i)·ŷ_i + (1 − β(CV_i))·Σ_{j∈N(i)} ŷ_j / |N(i)|
            let y = b * own + (1.0 - b) * mean;
            if paper_literal {
                (y.round() as u32).max(r_min)
            } else {
                let floor = r_min.max(stages[i].need).min(stages[i].corrected.max(r_min));
                (y.ceil() as u32).clamp(floor, stages[i].corrected.max(r_min))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beta_matches_the_authors_values() {
        assert!((beta(0.0) - 0.634).abs() < 1e-3);
        assert!((beta(1.0) - 0.75).abs() < 1e-12);
        assert!((beta(2.0) - 0.866).abs() < 1e-3);
    }

    #[test]
    fn a_spike_is_pulled_towards_its_neighbours_but_not_below_need_and_never_raised() {
        let s = |corrected, cv, need| Smoothing { corrected, cv, need };
        let out = smooth(&[s(2, 0.0, 1), s(10, 0.0, 3), s(2, 0.0, 2)], 1, false);
        // Middle: 0.634·10 + 0.366·2 = 7.07 → 8; the ends are never raised.
        assert_eq!(out, vec![2, 8, 2]);
        let out = smooth(&[s(2, 0.0, 1), s(10, 0.0, 9), s(2, 0.0, 2)], 1, false);
        assert_eq!(out[1], 9, "clamped at what queueing needs");
        // A burstier stage keeps more.
        let calm = smooth(&[s(2, 0.0, 1), s(10, 0.0, 1), s(2, 0.0, 1)], 1, false)[1];
        let bursty = smooth(&[s(2, 0.0, 1), s(10, 4.0, 1), s(2, 0.0, 1)], 1, false)[1];
        assert!(bursty > calm, "{bursty} vs {calm}");
    }

    #[test]
    fn the_paper_literal_rule_raises_a_stage_towards_larger_neighbours() {
        let s = |corrected| Smoothing { corrected, cv: 0.0, need: 1 };
        let out = smooth(&[s(1), s(10)], 1, true);
        assert!(out[0] > 1, "{out:?}");
        assert_eq!(smooth(&[s(1), s(10)], 1, false)[0], 1);
    }
}
