//! Whether fixed shapes pay here (Morph's robust Arlo, not the paper's). Arlo's gain rests on a
//! runtime compiled for one shape running faster than a dynamic-shaped one, by more than
//! padding to its bound costs. Where the dynamic runtime runs as fast as the profile says (no
//! compilation penalty: candle on a CPU), padding only costs, and an allocation onto fixed
//! runtimes makes every short input pay for it. So the dynamic runtime's penalty is measured from
//! the batches (against the fixed runtimes' speed once they have run), and an allocation moves instances onto fixed runtimes only if the lengths
//! seen, each padded to its bound, cost less there than on the dynamic runtime at that speed.

use morph_core::{LatencyProfile, Nanos, PaddedShape, RuntimeSpec, ShapeKind};

/// Batches' measured times over the profile's, averaged.
#[derive(Debug, Clone, Copy, Default)]
struct MeanRatio {
    sum: f64,
    batches: u64,
}

impl MeanRatio {
    fn mean(self) -> Option<f64> {
        (self.batches > 0).then(|| self.sum / self.batches as f64)
    }
}

/// The runtimes' measured speeds against the profile, by shape kind. Contention (more
/// instances than the profile was measured with, a busy host) slows both kinds alike, so the
/// dynamic runtime's penalty is its ratio over the fixed runtimes' once both have run.
#[derive(Debug, Clone, Default)]
pub struct MeasuredSpeed {
    dynamic: MeanRatio,
    fixed: MeanRatio,
}

impl MeasuredSpeed {
    /// A batch on a runtime of `kind` that the profile prices at `predicted` took `took`.
    pub fn observe(&mut self, kind: ShapeKind, took: Nanos, predicted: Nanos) {
        if predicted == 0 {
            return;
        }
        let ratio = match kind {
            ShapeKind::Dynamic => &mut self.dynamic,
            ShapeKind::Fixed => &mut self.fixed,
        };
        ratio.sum += took as f64 / predicted as f64;
        ratio.batches += 1;
    }

    /// Fixed-runtime batches measured so far.
    pub fn fixed_batches(&self) -> u64 {
        self.fixed.batches
    }

    /// How many times a fixed runtime's time (the profile's, until one has run) a dynamic
    /// batch takes; none before any dynamic batch.
    pub fn dynamic_penalty(&self) -> Option<f64> {
        Some(self.dynamic.mean()? / self.fixed.mean().unwrap_or(1.0))
    }
}

/// Whether `histogram` (arrivals by length) costs less on `set` (ascending; each length on
/// the shortest runtime that fits it, a fixed one padding to its bound) than on the dynamic
/// runtime at `factor` times the profile, one row per batch of `rows`.
pub fn fixed_shapes_pay(
    profile: &LatencyProfile,
    histogram: &[u64],
    set: &[RuntimeSpec],
    factor: f64,
    rows: u32,
) -> bool {
    let ms = |len: u32| profile.latency_ms(PaddedShape { len: len.max(1), batch: rows });
    let (mut fixed, mut dynamic) = (0.0, 0.0);
    for (len, &n) in histogram.iter().enumerate().filter(|(_, n)| **n > 0) {
        let len = len as u32;
        let on_dynamic = factor * ms(len);
        dynamic += n as f64 * on_dynamic;
        fixed += n as f64
            * match set.iter().find(|r| r.max_len >= len) {
                Some(r) if r.kind == ShapeKind::Fixed => ms(r.max_len),
                _ => on_dynamic,
            };
    }
    fixed < dynamic
}

#[cfg(test)]
mod tests {
    use morph_core::Point;

    use super::*;

    /// Linear in the length: 1 ms per 64 tokens (a CPU, no staircase).
    fn linear() -> LatencyProfile {
        let points = [Point { batch: 1, len: 64, ms: 1.0 }, Point { batch: 1, len: 512, ms: 8.0 }];
        LatencyProfile::from_points("linear", points).expect("a profile")
    }

    #[test]
    fn padding_pays_only_against_a_slower_dynamic_runtime() {
        // Lengths 40 and 100 on fixed 64 / 128 runtimes: padded 1 + 2 ms against 1 + 1.56 ms
        // dynamic at the profile's speed (the profile holds 1 ms below 64 tokens); the dynamic
        // runtime must be over 1.17x slower to lose.
        let mut histogram = vec![0u64; 513];
        histogram[40] = 10;
        histogram[100] = 10;
        let set = [RuntimeSpec::fixed(64, 1), RuntimeSpec::fixed(128, 1), RuntimeSpec::dynamic(512, 1)];
        let profile = linear();
        assert!(!fixed_shapes_pay(&profile, &histogram, &set, 1.0, 1));
        assert!(!fixed_shapes_pay(&profile, &histogram, &set, 1.15, 1));
        assert!(fixed_shapes_pay(&profile, &histogram, &set, 1.2, 1));
    }

    #[test]
    fn the_penalty_is_the_dynamic_ratio_over_the_fixed_one() {
        let mut speed = MeasuredSpeed::default();
        assert_eq!(speed.dynamic_penalty(), None);
        speed.observe(ShapeKind::Dynamic, 12, 10);
        speed.observe(ShapeKind::Dynamic, 14, 10);
        // No fixed batch yet: against the profile.
        assert!((speed.dynamic_penalty().unwrap() - 1.3).abs() < 1e-12);
        // A contended host: fixed batches as slow as dynamic ones, so no penalty.
        speed.observe(ShapeKind::Fixed, 13, 10);
        assert!((speed.dynamic_penalty().unwrap() - 1.0).abs() < 1e-12);
    }
}
