//! An engine that computes nothing: it sleeps for the latency its profile gives the padded
//! batch shape, then returns placeholder unit vectors. It lets the live server's control
//! plane run hundreds of instances on a two-core machine.

use std::sync::Arc;
use std::time::{Duration, Instant};

use morph_core::{Profile, RuntimeSpec};

use crate::{Engine, EngineError, check_batch};

#[derive(Debug, Clone)]
pub struct EmulatedRuntime {
    profile: Arc<Profile>,
    spec: RuntimeSpec,
    dim: usize,
}

/// The last stretch of an emulated batch is spun rather than slept: thread wake-ups overshoot
/// by tens of microseconds, which is several percent of a 1 ms GPU batch.
const SPIN: Duration = Duration::from_micros(150);

impl EmulatedRuntime {
    pub fn new(profile: Arc<Profile>, spec: RuntimeSpec, dim: usize) -> Self {
        Self { profile, spec, dim }
    }

    /// Time the profile gives a batch of `rows` sequences whose longest has `longest` tokens.
    pub fn batch_time(&self, longest: u32, rows: u32) -> Duration {
        let shape = self.spec.padded_shape(longest, rows);
        Duration::from_nanos(self.profile.latency(shape.len, shape.batch))
    }
}

fn wait_until(deadline: Instant) {
    let now = Instant::now();
    if deadline > now + SPIN {
        std::thread::sleep(deadline - now - SPIN);
    }
    while Instant::now() < deadline {
        std::thread::yield_now();
    }
}

impl Engine for EmulatedRuntime {
    fn runtime(&self) -> RuntimeSpec {
        self.spec
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&mut self, inputs: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, EngineError> {
        let start = Instant::now();
        let longest = check_batch(self.spec, inputs)?;
        wait_until(start + self.batch_time(longest, inputs.len() as u32));
        let mut unit = vec![0.0; self.dim];
        if let Some(first) = unit.first_mut() {
            *first = 1.0;
        }
        Ok(vec![unit; inputs.len()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_for_the_profiled_time_of_the_padded_shape() {
        let profile = Profile::from_points("m", [(1, 16, 4.0), (1, 64, 8.0), (2, 64, 12.0)]).unwrap();
        let mut fixed = EmulatedRuntime::new(Arc::new(profile.clone()), RuntimeSpec::fixed(64, 2), 3);
        assert_eq!(fixed.batch_time(10, 1), Duration::from_millis(12));
        let dynamic = EmulatedRuntime::new(Arc::new(profile), RuntimeSpec::dynamic(64, 2), 3);
        assert_eq!(dynamic.batch_time(16, 1), Duration::from_millis(4));
        let start = Instant::now();
        let out = fixed.embed(&[vec![1, 2, 3]]).unwrap();
        assert!(start.elapsed() >= Duration::from_millis(12));
        assert_eq!(out, vec![vec![1.0, 0.0, 0.0]]);
        assert!(fixed.embed(&[vec![1; 65]]).is_err());
    }
}
