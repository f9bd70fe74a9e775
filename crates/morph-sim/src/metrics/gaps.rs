//! The stream's inter-arrival gaps, kept as they come: their count, sum and sum of squares,
//! for the coefficient of variation a report states beside its figures.

use morph_core::Time;

#[derive(Debug, Clone, Default)]
pub struct ArrivalGaps {
    previous: Option<Time>,
    count: u64,
    /// Σ gap and Σ gap², in ms.
    sum: f64,
    squares: f64,
}

impl ArrivalGaps {
    pub fn arrived(&mut self, at: Time) {
        if let Some(before) = self.previous {
            let gap = (at - before) as f64 / 1e6;
            self.count += 1;
            self.sum += gap;
            self.squares += gap * gap;
        }
        self.previous = Some(at);
    }

    /// The gaps' coefficient of variation (1: Poisson); NaN with fewer than two gaps.
    pub fn cv(&self) -> f64 {
        if self.count < 2 {
            return f64::NAN;
        }
        let mean = self.sum / self.count as f64;
        (self.squares / self.count as f64 - mean * mean).max(0.0).sqrt() / mean
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn even_gaps_have_no_variation_and_two_arrivals_too_few() {
        let mut gaps = ArrivalGaps::default();
        gaps.arrived(Time(0));
        gaps.arrived(Time(1_000_000));
        assert!(gaps.cv().is_nan());
        gaps.arrived(Time(2_000_000));
        assert!(gaps.cv().abs() < 1e-9);
        gaps.arrived(Time(10_000_000));
        assert!(gaps.cv() > 0.5);
    }
}
