//! OTAS Algorithm 3 (`Manually_Allocate`): the rule used while the queue is short (≤ β batches)
//! or in the first seconds of service. Every batch gets the plan the arrival rate affords,
//! f(q), except a batch about to miss its deadline (the fastest plan) and a batch of high mean
//! utility (the most accurate plan). It never skips.

use morph_core::Time;

use super::plan::{BatchCosts, Choice};

/// f(q): the most accurate plan whose sustainable throughput μ(γ) exceeds the arrival rate `q`
/// (req/s); the fastest when none does. `throughputs` are by plan index, fastest plan first.
/// Half-open bands, as the spec reads Table I (A9): q = μ(γ) already needs a faster plan.
pub fn rate_plan(q: f64, throughputs: &[f64]) -> usize {
    throughputs.iter().rposition(|&mu| mu > q).unwrap_or(0)
}

/// OTAS Alg. 3 over `batches` (deadline order) from clock `now`, with `rated` = f(q) and κ.
pub fn allocate(now: Time, batches: &[BatchCosts], rated: usize, kappa: f64) -> Vec<Choice> {
    let mut clock = now.0;
    batches
        .iter()
        .map(|batch| {
            let most_accurate = batch.by_plan.len() - 1;
            let (took, _) = batch.by_plan[rated];
            let chosen = if clock.saturating_add(took) >= batch.deadline.0 {
                0 // line 4: about to miss, min(L)
            } else if batch.mean_utility > kappa {
                most_accurate // line 6: Ū_b > κ, max(L)
            } else {
                rated // line 8: f(q)
            };
            clock = clock.saturating_add(batch.by_plan[chosen].0); // line 10
            Some(chosen)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Table I's sustainable rates (upper band edges) for L = {−20, −15, −10, −5, 0, 2, 4, 8}.
    const TABLE_I: [f64; 8] = [f64::INFINITY, 1000.0, 520.0, 450.0, 380.0, 350.0, 320.0, 280.0];
    const L: [i16; 8] = [-20, -15, -10, -5, 0, 2, 4, 8];

    fn f(q: f64) -> i16 {
        L[rate_plan(q, &TABLE_I)]
    }

    #[test]
    fn the_rate_bands_match_table_one() {
        assert_eq!(f(0.0), 8);
        assert_eq!((f(279.0), f(280.0)), (8, 4));
        assert_eq!((f(348.0), f(349.0), f(350.0)), (2, 2, 0));
        assert_eq!((f(379.0), f(380.0)), (0, -5));
        assert_eq!((f(999.0), f(1000.0)), (-15, -20));
        // No plan keeps up: the fastest.
        assert_eq!(rate_plan(500.0, &[100.0, 50.0]), 0);
    }

    fn batch(deadline_ms: u64, mean_utility: f64) -> BatchCosts {
        let by_plan = [10u64, 20, 40].iter().map(|ms| (ms * 1_000_000, 1.0)).collect();
        BatchCosts { deadline: Time(deadline_ms * 1_000_000), mean_utility, by_plan }
    }

    #[test]
    fn each_branch_and_the_advancing_clock() {
        let batches = [
            batch(100, 0.3), // f(q) = plan 1: ends at 20
            batch(100, 0.9), // Ū > κ: the most accurate, ends at 60
            batch(70, 0.3),  // 60 + 20 ≥ 70: about to miss, the fastest; ends at 70
            batch(95, 0.3),  // 70 + 20 = 90 < 95: f(q) again
        ];
        assert_eq!(allocate(Time::ZERO, &batches, 1, 0.8), [Some(1), Some(2), Some(0), Some(1)]);
        // κ is strict: a mean utility of exactly κ gets f(q).
        assert_eq!(allocate(Time::ZERO, &[batch(100, 0.8)], 1, 0.8), [Some(1)]);
    }
}
