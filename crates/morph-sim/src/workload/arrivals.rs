//! Arrival processes. Each yields offsets in seconds from the start, ascending, below `duration`.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp, Gamma};
use serde::Deserialize;

use super::WorkloadError;
use super::trace::Trace;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Arrivals {
    /// Exponential gaps at `rate` per second.
    Poisson { rate: f64 },
    /// Gamma gaps with mean `1/rate` and coefficient of variation `cv` (QUART's CV sweeps;
    /// cv = 1 is Poisson).
    Gamma { rate: f64, cv: f64 },
    /// Markov-modulated Poisson: state i has `rates[i]`; each state lasts an exponential time
    /// with mean `dwell_s`, then moves to the next state (cyclically).
    Mmpp { rates: Vec<f64>, dwell_s: f64 },
    /// A per-second rate that walks at random between `low` and `high`, starting halfway (its
    /// nominal mean; a rate sweep scales all three):
    /// each second it moves by a uniform step of at most `step` (reflected at the bounds);
    /// Poisson within each second (OTAS's fluctuating synthetic load, §V).
    Walk { low: f64, high: f64, step: f64 },
    /// The timestamps of a trace, divided by `speedup`; with `loop` the trace is tiled (each
    /// copy starting one mean gap after the last arrival of the one before) to fill the run.
    Trace {
        #[serde(flatten)]
        trace: Trace,
        #[serde(default = "one")]
        speedup: f64,
        #[serde(default, rename = "loop")]
        repeat: bool,
    },
}

fn one() -> f64 {
    1.0
}

fn positive(what: &str, v: f64) -> Result<f64, WorkloadError> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(WorkloadError::Invalid(format!("{what} must be > 0, got {v}")))
    }
}

impl Arrivals {
    /// Mean offered rate per second, if known without a trace.
    pub fn mean_rate(&self) -> Option<f64> {
        match self {
            Arrivals::Poisson { rate } | Arrivals::Gamma { rate, .. } => Some(*rate),
            Arrivals::Mmpp { rates, .. } => Some(rates.iter().sum::<f64>() / rates.len().max(1) as f64),
            Arrivals::Walk { low, high, .. } => Some((low + high) / 2.0),
            Arrivals::Trace { .. } => None,
        }
    }

    /// Whether the process is Poisson given its rate path (Poisson, MMPP, walk): thinning it
    /// keeps its kind, so a rate sweep can take each lower rate as a subset of the highest.
    pub fn thins(&self) -> bool {
        matches!(self, Arrivals::Poisson { .. } | Arrivals::Mmpp { .. } | Arrivals::Walk { .. })
    }

    /// Multiplies the rate by `factor` (trace: compresses time by it).
    pub fn scaled(&self, factor: f64) -> Arrivals {
        match self.clone() {
            Arrivals::Poisson { rate } => Arrivals::Poisson { rate: rate * factor },
            Arrivals::Gamma { rate, cv } => Arrivals::Gamma { rate: rate * factor, cv },
            Arrivals::Mmpp { rates, dwell_s } => {
                Arrivals::Mmpp { rates: rates.iter().map(|r| r * factor).collect(), dwell_s }
            }
            Arrivals::Walk { low, high, step } => {
                Arrivals::Walk { low: low * factor, high: high * factor, step: step * factor }
            }
            Arrivals::Trace { trace, speedup, repeat } => {
                Arrivals::Trace { trace, speedup: speedup * factor, repeat }
            }
        }
    }

    /// Every arrival offset over `duration`, collected ([`Arrivals::times`]).
    pub fn generate(&self, duration: f64, seed: u64) -> Result<Vec<f64>, WorkloadError> {
        Ok(self.times(duration, seed)?.collect())
    }

    /// The arrival offsets over `duration`, drawn lazily. The gaps come from one stream and a
    /// modulated process's path (an MMPP's state durations, a walk's rate) from another, both
    /// from `seed`: the same seed gives the same burst pattern at any rate.
    pub fn times(&self, duration: f64, seed: u64) -> Result<ArrivalTimes, WorkloadError> {
        let gaps = StdRng::seed_from_u64(seed);
        let mut path = StdRng::seed_from_u64(seed ^ PATH_STREAM);
        let clock = match self {
            Arrivals::Poisson { rate } => Clock::Renewal(Gap::Exp(exp(*rate)?)),
            Arrivals::Gamma { rate, cv } => {
                let shape = 1.0 / positive("cv", *cv)?.powi(2);
                let scale = 1.0 / (positive("rate", *rate)? * shape);
                Clock::Renewal(Gap::Gamma(Gamma::new(shape, scale).map_err(invalid)?))
            }
            Arrivals::Mmpp { rates, dwell_s } => {
                if rates.is_empty() {
                    return Err(WorkloadError::Invalid("mmpp needs at least one rate".into()));
                }
                let rates = rates.iter().map(|r| exp(*r)).collect::<Result<Vec<_>, _>>()?;
                let dwell = Exp::new(1.0 / positive("dwell_s", *dwell_s)?).map_err(invalid)?;
                let until = dwell.sample(&mut path);
                Clock::Modulated { rates, state: 0, until, step: Step::Dwell(dwell) }
            }
            Arrivals::Walk { low, high, step } => {
                let (low, high) = (positive("low", *low)?, positive("high", *high)?);
                if high < low || !(step.is_finite() && *step >= 0.0) {
                    return Err(WorkloadError::Invalid(format!(
                        "walk needs low ≤ high and step ≥ 0 ({low}, {high}, {step})"
                    )));
                }
                let rate = (low + high) / 2.0;
                let walk = Walk { low, high, step: *step, rate };
                Clock::Modulated { rates: vec![exp(rate)?], state: 0, until: 1.0, step: Step::Walk(walk) }
            }
            Arrivals::Trace { trace, speedup, repeat } => {
                let speedup = positive("speedup", *speedup)?;
                let times = trace.times()?;
                let first = times.first().copied().unwrap_or(0.0);
                let offsets: Vec<f64> = times.iter().map(|t| (t - first) / speedup).collect();
                let span = offsets.last().copied().unwrap_or(0.0);
                // A copy lasts the span and one mean gap, so the tiles keep the trace's rate.
                let period = span * offsets.len() as f64 / (offsets.len() as f64 - 1.0).max(1.0);
                let repeat = *repeat && period > 0.0;
                Clock::Tiled { offsets, period, repeat, index: 0 }
            }
        };
        Ok(ArrivalTimes { clock, t: 0.0, duration, gaps, path })
    }
}

/// Seeds a modulated process's path apart from its gaps.
const PATH_STREAM: u64 = 0x00B0_A75E_ED0F_B0A7;

fn invalid(e: impl std::fmt::Display) -> WorkloadError {
    WorkloadError::Invalid(e.to_string())
}

fn exp(rate: f64) -> Result<Exp<f64>, WorkloadError> {
    Exp::new(positive("rate", rate)?).map_err(invalid)
}

/// A renewal process's gap.
#[derive(Debug)]
enum Gap {
    Exp(Exp<f64>),
    Gamma(Gamma<f64>),
}

/// How a modulated process's rate moves at the end of a state.
#[derive(Debug)]
enum Step {
    /// MMPP: to the next state (cyclically) after an exponential dwell.
    Dwell(Exp<f64>),
    /// A walk: each second by a uniform step of at most `step`, reflected at the bounds.
    Walk(Walk),
}

#[derive(Debug)]
struct Walk {
    low: f64,
    high: f64,
    step: f64,
    rate: f64,
}

#[derive(Debug)]
enum Clock {
    Renewal(Gap),
    /// Poisson within each state of a rate path; a gap that crosses the state's end is dropped
    /// and the next state starts at that end (memorylessness).
    Modulated {
        rates: Vec<Exp<f64>>,
        state: usize,
        until: f64,
        step: Step,
    },
    /// A trace's offsets, tiled every `period` with `repeat`.
    Tiled {
        offsets: Vec<f64>,
        period: f64,
        repeat: bool,
        index: usize,
    },
}

/// Arrival offsets in seconds, ascending, below the duration ([`Arrivals::times`]).
#[derive(Debug)]
pub struct ArrivalTimes {
    clock: Clock,
    t: f64,
    duration: f64,
    gaps: StdRng,
    /// A modulated process's path: its state durations or rate steps.
    path: StdRng,
}

impl Iterator for ArrivalTimes {
    type Item = f64;

    fn next(&mut self) -> Option<f64> {
        let t = match &mut self.clock {
            Clock::Renewal(gap) => {
                self.t += match gap {
                    Gap::Exp(d) => d.sample(&mut self.gaps),
                    Gap::Gamma(d) => d.sample(&mut self.gaps),
                };
                self.t
            }
            Clock::Modulated { rates, state, until, step } => loop {
                if self.t >= self.duration {
                    return None;
                }
                let next = self.t + rates[*state].sample(&mut self.gaps);
                if next < *until {
                    self.t = next;
                    break next;
                }
                self.t = *until;
                match step {
                    Step::Dwell(dwell) => {
                        *state = (*state + 1) % rates.len();
                        *until += dwell.sample(&mut self.path);
                    }
                    Step::Walk(w) => {
                        let mut rate = w.rate + self.path.random_range(-1.0..=1.0) * w.step;
                        rate = if rate > w.high { 2.0 * w.high - rate } else { rate };
                        rate = if rate < w.low { 2.0 * w.low - rate } else { rate };
                        w.rate = rate.clamp(w.low, w.high);
                        rates[0] = Exp::new(w.rate).ok()?;
                        *until += 1.0;
                    }
                }
            },
            Clock::Tiled { offsets, period, repeat, index } => {
                let (copy, at) = (*index / offsets.len().max(1), *index % offsets.len().max(1));
                if offsets.is_empty() || (copy > 0 && !*repeat) {
                    return None;
                }
                *index += 1;
                offsets[at] + copy as f64 * *period
            }
        };
        (t < self.duration).then_some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gaps(a: &Arrivals, duration: f64) -> (f64, f64) {
        let times = a.generate(duration, 3).unwrap();
        let gaps: Vec<f64> = times.windows(2).map(|w| w[1] - w[0]).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        (1.0 / mean, var.sqrt() / mean)
    }

    #[test]
    fn poisson_and_gamma_have_their_rate_and_cv() {
        let (rate, cv) = gaps(&Arrivals::Poisson { rate: 200.0 }, 200.0);
        assert!((rate / 200.0 - 1.0).abs() < 0.02 && (cv - 1.0).abs() < 0.03, "{rate} {cv}");
        for want_cv in [0.5, 4.0] {
            let (rate, cv) = gaps(&Arrivals::Gamma { rate: 200.0, cv: want_cv }, 500.0);
            assert!(
                (rate / 200.0 - 1.0).abs() < 0.05 && (cv / want_cv - 1.0).abs() < 0.08,
                "{rate} {cv} vs {want_cv}"
            );
        }
    }

    #[test]
    fn mmpp_is_burstier_than_poisson_at_the_same_mean() {
        let (rate, cv) = gaps(&Arrivals::Mmpp { rates: vec![50.0, 350.0], dwell_s: 5.0 }, 400.0);
        assert!((rate / 200.0 - 1.0).abs() < 0.25, "{rate}");
        assert!(cv > 1.2, "cv {cv}");
    }

    #[test]
    fn a_walk_stays_within_its_bounds_and_fluctuates() {
        let walk = Arrivals::Walk { low: 50.0, high: 180.0, step: 20.0 };
        let times = walk.generate(600.0, 5).unwrap();
        let mut per_second = vec![0usize; 600];
        for t in &times {
            per_second[*t as usize] += 1;
        }
        let mean = times.len() as f64 / 600.0;
        assert!((60.0..170.0).contains(&mean), "{mean}");
        // Poisson counts around a rate in [50, 180]: no second far outside it, and both halves
        // of the range visited.
        assert!(per_second.iter().all(|&n| (20..240).contains(&n)), "{per_second:?}");
        assert!(per_second.iter().any(|&n| n < 80) && per_second.iter().any(|&n| n > 150));
    }

    #[test]
    fn a_looped_trace_replays_its_rows_in_order_and_keeps_its_rate() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        std::fs::write(&path, "{\"timestamp\": 1000}\n{\"timestamp\": 1500}\n{\"timestamp\": 3000}\n")
            .unwrap();
        let trace = |repeat| Arrivals::Trace { trace: Trace::new(&path), speedup: 1.0, repeat };
        assert_eq!(trace(false).generate(10.0, 0).unwrap(), vec![0.0, 0.5, 2.0], "ends with the trace");
        // Span 2 s over 2 gaps: each copy lasts 3 s (the span and one mean gap).
        let looped = trace(true).generate(7.0, 0).unwrap();
        assert_eq!(looped, vec![0.0, 0.5, 2.0, 3.0, 3.5, 5.0, 6.0, 6.5]);
        let sped = Arrivals::Trace { trace: Trace::new(&path), speedup: 2.0, repeat: true };
        assert_eq!(sped.generate(2.0, 0).unwrap(), vec![0.0, 0.25, 1.0, 1.5, 1.75]);
    }

    #[test]
    fn invalid_parameters_are_errors() {
        assert!(Arrivals::Poisson { rate: 0.0 }.generate(1.0, 0).is_err());
        assert!(Arrivals::Gamma { rate: 1.0, cv: -1.0 }.generate(1.0, 0).is_err());
    }
}
