//! An engine that computes nothing: it sleeps for the latency its profile gives the padded
//! batch shape (the whole model's; a pipeline stage of `count` takes 1/`count` of it), then
//! returns placeholder unit vectors (or, on a pipeline stage that hands on, placeholder hidden
//! states of each row's length). It lets the live server's control plane
//! run hundreds of instances on a two-core machine.

use std::sync::Arc;
use std::time::{Duration, Instant};

use morph_core::{LatencyProfile, RuntimeSpec, TokenPlan, UnitSpec};

use crate::{BatchInput, Engine, EngineError, check_lengths};

#[derive(Debug, Clone)]
pub struct EmulatedRuntime {
    profile: Arc<LatencyProfile>,
    spec: RuntimeSpec,
    /// Hands hidden states on (a stage that is not its pipeline's last).
    hands_on: bool,
    /// The share of the profile's latency a batch takes: 1, or 1/count for a stage of count.
    share: f64,
    dim: usize,
}

/// The last stretch of an emulated batch is spun rather than slept: thread wake-ups overshoot
/// by tens of microseconds, which is several percent of a 1 ms GPU batch.
const SPIN: Duration = Duration::from_micros(150);

impl EmulatedRuntime {
    pub fn new(profile: Arc<LatencyProfile>, unit: UnitSpec, dim: usize) -> Self {
        let hands_on = unit.stage.is_some_and(|s| !s.is_last());
        let share = unit.stage.map_or(1.0, |s| 1.0 / f64::from(s.count.max(1)));
        Self { profile, spec: unit.runtime, hands_on, share, dim }
    }

    /// Time the profile gives a batch of `rows` sequences whose longest has `longest` tokens.
    pub fn batch_time(&self, longest: u32, rows: u32) -> Duration {
        let shape = self.spec.padded_shape(longest, rows);
        Duration::from_nanos((self.profile.latency(shape) as f64 * self.share) as u64)
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

    /// Every plan costs what the plain model does.
    fn run(&mut self, input: BatchInput<'_>, _plan: TokenPlan) -> Result<Vec<Vec<f32>>, EngineError> {
        let start = Instant::now();
        let lens = input.lens(self.dim);
        let longest = check_lengths(self.spec, &lens)?;
        wait_until(start + self.batch_time(longest, lens.len() as u32));
        if self.hands_on {
            return Ok(lens.iter().map(|&n| vec![0.0; n * self.dim]).collect());
        }
        let mut unit = vec![0.0; self.dim];
        if let Some(first) = unit.first_mut() {
            *first = 1.0;
        }
        Ok(vec![unit; lens.len()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use morph_core::Point;

    #[test]
    fn sleeps_for_the_profiled_time_of_the_padded_shape() {
        let profile = LatencyProfile::from_points(
            "m",
            [
                Point { batch: 1, len: 16, ms: 4.0 },
                Point { batch: 1, len: 64, ms: 8.0 },
                Point { batch: 2, len: 64, ms: 12.0 },
            ],
        )
        .unwrap();
        let unit = |r| UnitSpec::batch(r);
        let mut fixed = EmulatedRuntime::new(Arc::new(profile.clone()), unit(RuntimeSpec::fixed(64, 2)), 3);
        assert_eq!(fixed.batch_time(10, 1), Duration::from_millis(12));
        let dynamic = EmulatedRuntime::new(Arc::new(profile), unit(RuntimeSpec::dynamic(64, 2)), 3);
        assert_eq!(dynamic.batch_time(16, 1), Duration::from_millis(4));
        let start = Instant::now();
        let out = fixed.embed(&[vec![1, 2, 3]]).unwrap();
        assert!(start.elapsed() >= Duration::from_millis(12));
        assert_eq!(out, vec![vec![1.0, 0.0, 0.0]]);
        assert!(fixed.embed(&[vec![1; 65]]).is_err());
    }

    #[test]
    fn a_stage_that_hands_on_returns_hidden_states_and_takes_them_in() {
        let profile =
            Arc::new(LatencyProfile::from_points("m", [Point { batch: 1, len: 16, ms: 0.1 }]).unwrap());
        let stage = |index| morph_core::StageSpec::even(morph_core::ModelId(0), index, 2, 6);
        let unit = UnitSpec::batch(RuntimeSpec::dynamic(16, 2));
        let mut first = EmulatedRuntime::new(profile.clone(), unit.with_stage(stage(0)), 3);
        let mut last = EmulatedRuntime::new(profile, unit.with_stage(stage(1)), 3);
        let hidden =
            first.run(BatchInput::Tokens(&[vec![1, 2], vec![1, 2, 3, 4]]), TokenPlan::Plain).unwrap();
        assert_eq!(hidden.iter().map(Vec::len).collect::<Vec<_>>(), vec![6, 12], "tokens × hidden per row");
        let pooled = last.run(BatchInput::Hidden(&hidden), TokenPlan::Plain).unwrap();
        assert_eq!(pooled, vec![vec![1.0, 0.0, 0.0]; 2]);
        assert_eq!(
            first.batch_time(16, 1),
            Duration::from_micros(50),
            "a stage of 2 takes half the model's time"
        );
    }
}
