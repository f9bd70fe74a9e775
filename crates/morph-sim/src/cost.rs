//! Cost models: how long a batch takes on an instance.

use morph_core::{Nanos, Profile, RuntimeSpec, ShapeKind};

/// The time one batch of sequences with these lengths takes on a runtime.
pub trait CostModel {
    fn batch_time(&self, runtime: RuntimeSpec, lengths: &[u32]) -> Nanos;
}

/// A latency profile, looked up at the padded shape the runtime runs. Dynamic-shape runtimes
/// may pay a penalty factor (dynamic compilation is slower than a static graph; Arlo measured
/// 1.22–3.56× for TensorRT; 1.0 means none).
#[derive(Debug, Clone)]
pub struct ProfileCost {
    profile: Profile,
    dynamic_penalty: f64,
}

impl ProfileCost {
    pub fn new(profile: Profile, dynamic_penalty: f64) -> Self {
        Self { profile, dynamic_penalty }
    }
}

impl CostModel for ProfileCost {
    fn batch_time(&self, runtime: RuntimeSpec, lengths: &[u32]) -> Nanos {
        let longest = lengths.iter().copied().max().unwrap_or(1);
        let shape = runtime.padded_shape(longest, lengths.len() as u32);
        let base = self.profile.latency(shape.len, shape.batch);
        match runtime.kind {
            ShapeKind::Fixed => base,
            ShapeKind::Dynamic => (base as f64 * self.dynamic_penalty).round() as Nanos,
        }
    }
}

/// How long a launched instance takes to come up: `cold` when its runtime was never loaded on
/// the cluster before, `warm` when its parameters are still cached in host memory (QUART's
/// parameter cache; Arlo's replacement "usually lasts approximately 1 second").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Startup {
    pub cold: Nanos,
    pub warm: Nanos,
}

impl Default for Startup {
    fn default() -> Self {
        Self { cold: 1_000_000_000, warm: 1_000_000_000 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_runtimes_pay_their_shape_dynamic_ones_the_batch_and_penalty() {
        let p = Profile::from_points("m", [(1, 16, 1.0), (1, 64, 2.0), (4, 16, 3.0), (4, 64, 8.0)]).unwrap();
        let cost = ProfileCost::new(p, 1.5);
        assert_eq!(cost.batch_time(RuntimeSpec::fixed(64, 4), &[10]), 8_000_000);
        assert_eq!(cost.batch_time(RuntimeSpec::dynamic(64, 4), &[16]), 1_500_000);
        // batch 1, len 40: halfway between 1 ms and 2 ms, times 1.5
        assert_eq!(cost.batch_time(RuntimeSpec::dynamic(64, 4), &[40]), 2_250_000);
    }
}
