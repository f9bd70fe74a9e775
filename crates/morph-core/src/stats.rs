//! Latency summaries shared by the load generator and the simulator, and the exponential
//! smoothing the policies' running estimates share.

use serde::Serialize;

/// Mean and tail percentiles of a set of latencies (ms).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatencySummary {
    pub count: usize,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p98_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// `newest` folded into the running estimate `previous` with weight `weight` (0..=1); the first
/// value is taken as it is.
pub fn smoothed(previous: Option<f64>, newest: f64, weight: f64) -> f64 {
    previous.map_or(newest, |s| s + weight * (newest - s))
}

/// The `q`-quantile (0..=1) of ascending `sorted`, by the nearest-rank method.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

impl LatencySummary {
    pub fn of(mut latencies_ms: Vec<f64>) -> Self {
        latencies_ms.sort_by(f64::total_cmp);
        let n = latencies_ms.len();
        let mean = if n == 0 { f64::NAN } else { latencies_ms.iter().sum::<f64>() / n as f64 };
        Self {
            count: n,
            mean_ms: mean,
            p50_ms: percentile(&latencies_ms, 0.50),
            p98_ms: percentile(&latencies_ms, 0.98),
            p99_ms: percentile(&latencies_ms, 0.99),
            max_ms: latencies_ms.last().copied().unwrap_or(f64::NAN),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let s = LatencySummary::of((1..=100).rev().map(f64::from).collect());
        assert_eq!(
            (s.count, s.mean_ms, s.p50_ms, s.p98_ms, s.p99_ms, s.max_ms),
            (100, 50.5, 50.0, 98.0, 99.0, 100.0)
        );
        assert_eq!(percentile(&[7.0], 0.99), 7.0);
        assert!(LatencySummary::of(vec![]).mean_ms.is_nan());
    }
}
