//! Latencies in bounded memory: an HDR histogram whose quantiles are within
//! [`QUANTILE_ERROR`] of the exact ones, with the mean and the maximum kept exact.

use hdrhistogram::Histogram;
use morph_core::{Nanos, time::nanos_to_ms};

/// Significant decimal digits the histogram keeps of every latency.
const SIGNIFICANT_DIGITS: u8 = 3;
/// The most a reported quantile differs from the exact one, relative to it (the histogram's
/// bucket width at 3 significant digits: 2⁻¹⁰).
pub const QUANTILE_ERROR: f64 = 1.0 / 1024.0;

/// The latencies of completed requests.
#[derive(Debug, Clone)]
pub struct Latencies {
    histogram: Histogram<u64>,
    sum: u128,
    max: Nanos,
}

impl Default for Latencies {
    fn default() -> Self {
        let histogram = Histogram::new(SIGNIFICANT_DIGITS).expect("3 significant digits are in range");
        Self { histogram, sum: 0, max: 0 }
    }
}

impl Latencies {
    pub fn record(&mut self, latency: Nanos) {
        // The histogram grows to take any value; only past u64's range would it saturate.
        if self.histogram.record(latency.max(1)).is_err() {
            self.histogram.saturating_record(latency.max(1));
        }
        self.sum += u128::from(latency);
        self.max = self.max.max(latency);
    }

    /// Takes in `other`'s latencies, as if each had been recorded here.
    pub fn absorb(&mut self, other: &Latencies) {
        self.histogram.add(&other.histogram).expect("the histograms grow to take any value");
        self.sum += other.sum;
        self.max = self.max.max(other.max);
    }

    pub fn count(&self) -> usize {
        self.histogram.len() as usize
    }

    /// Exact; 0 when there are none.
    pub fn mean_ms(&self) -> f64 {
        match self.count() {
            0 => 0.0,
            n => self.sum as f64 / n as f64 / 1e6,
        }
    }

    /// Exact; 0 when there are none.
    pub fn max_ms(&self) -> f64 {
        nanos_to_ms(self.max)
    }

    /// The `q`-quantile by nearest rank, within [`QUANTILE_ERROR`] (never above the maximum);
    /// NaN when there are none.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.count() == 0 {
            return f64::NAN;
        }
        let value = self.histogram.value_at_quantile(q).min(self.max);
        nanos_to_ms(value)
    }

    /// `(quantile, ms)` at `points` evenly spaced quantiles from 0 to 1 (for a CDF).
    pub fn cdf(&self, points: usize) -> Vec<(f64, f64)> {
        if self.count() == 0 {
            return Vec::new();
        }
        let points = points.max(2);
        (0..points)
            .map(|k| {
                let q = k as f64 / (points - 1) as f64;
                (q, self.quantile_ms(q))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use morph_core::stats::percentile;

    use super::*;

    /// Against the exact nearest-rank percentiles of the same values: within the stated error.
    #[test]
    fn quantiles_are_within_the_stated_error_and_the_mean_is_exact() {
        let mut lat = Latencies::default();
        let mut exact = Vec::new();
        let mut x: u64 = 7;
        for _ in 0..200_000 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            // Heavy-tailed, from 1 µs to about 10 s.
            let ns = 1_000 + (x >> 40) * (x >> 60).pow(3);
            lat.record(ns);
            exact.push(ns as f64 / 1e6);
        }
        exact.sort_by(f64::total_cmp);
        for q in [0.01, 0.5, 0.9, 0.98, 0.99, 0.999, 1.0] {
            let (got, want) = (lat.quantile_ms(q), percentile(&exact, q));
            assert!((got - want).abs() <= QUANTILE_ERROR * want, "q {q}: {got} vs {want}");
        }
        let mean = exact.iter().sum::<f64>() / exact.len() as f64;
        assert!((lat.mean_ms() - mean).abs() < 1e-9 * mean);
        assert_eq!(lat.max_ms(), *exact.last().unwrap());
        assert!(Latencies::default().quantile_ms(0.5).is_nan());
    }
}
