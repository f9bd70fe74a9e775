//! Timing an engine's batches: the median latency of a batch, on deterministic token ids.

use std::time::Instant;

use morph_core::TokenPlan;

use crate::{BatchInput, Engine, EngineError};

/// The median of `xs` (NaN for none).
pub fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 { xs[n / 2] } else { (xs[n / 2 - 1] + xs[n / 2]) / 2.0 }
}

/// Full-length rows of deterministic, non-special token ids, `[CLS] ... [SEP]` shaped.
pub fn synthetic_batch(len: u32, rows: u32) -> Vec<Vec<u32>> {
    (0..rows)
        .map(|r| {
            (0..len)
                .map(|i| match i {
                    0 => 101,
                    _ if i + 1 == len => 102,
                    _ => 2000 + (i * 7 + r * 13) % 20_000,
                })
                .collect()
        })
        .collect()
}

/// Median latency of one batch under `plan` (`runs` timed after `warmup`), in ms.
pub fn time_batch(
    engine: &mut dyn Engine,
    input: BatchInput<'_>,
    plan: TokenPlan,
    warmup: u32,
    runs: u32,
) -> Result<f64, EngineError> {
    Ok(median(batch_times(engine, input, plan, warmup, runs)?))
}

/// The latency of each of `runs` batches under `plan` after `warmup` untimed ones, in ms.
pub fn batch_times(
    engine: &mut dyn Engine,
    input: BatchInput<'_>,
    plan: TokenPlan,
    warmup: u32,
    runs: u32,
) -> Result<Vec<f64>, EngineError> {
    for _ in 0..warmup {
        engine.run(input, plan)?;
    }
    (0..runs.max(1))
        .map(|_| {
            let start = Instant::now();
            engine.run(input, plan)?;
            Ok(start.elapsed().as_secs_f64() * 1e3)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
