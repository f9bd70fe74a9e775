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

    pub fn generate(&self, duration: f64, rng: &mut impl Rng) -> Result<Vec<f64>, WorkloadError> {
        let mut out = Vec::new();
        match self {
            Arrivals::Poisson { rate } => {
                let gap =
                    Exp::new(positive("rate", *rate)?).map_err(|e| WorkloadError::Invalid(e.to_string()))?;
                fill(&mut out, 0.0, duration, || gap.sample(rng));
            }
            Arrivals::Gamma { rate, cv } => {
                let shape = 1.0 / positive("cv", *cv)?.powi(2);
                let scale = 1.0 / (positive("rate", *rate)? * shape);
                let gap = Gamma::new(shape, scale).map_err(|e| WorkloadError::Invalid(e.to_string()))?;
                fill(&mut out, 0.0, duration, || gap.sample(rng));
            }
            Arrivals::Mmpp { rates, dwell_s } => {
                if rates.is_empty() {
                    return Err(WorkloadError::Invalid("mmpp needs at least one rate".into()));
                }
                let dwell = Exp::new(1.0 / positive("dwell_s", *dwell_s)?)
                    .map_err(|e| WorkloadError::Invalid(e.to_string()))?;
                let (mut state, mut t) = (0, 0.0);
                while t < duration {
                    let end = (t + dwell.sample(rng)).min(duration);
                    let gap = Exp::new(positive("rate", rates[state])?)
                        .map_err(|e| WorkloadError::Invalid(e.to_string()))?;
                    fill(&mut out, t, end, || gap.sample(rng));
                    t = end;
                    state = (state + 1) % rates.len();
                }
            }
            Arrivals::Walk { low, high, step } => {
                let (low, high) = (positive("low", *low)?, positive("high", *high)?);
                if high < low || !(step.is_finite() && *step >= 0.0) {
                    return Err(WorkloadError::Invalid(format!(
                        "walk needs low ≤ high and step ≥ 0 ({low}, {high}, {step})"
                    )));
                }
                // The walk draws from its own stream, so a scaled walk (a rate sweep) follows the
                // same path, scaled, whatever the Poisson draws within each second.
                let mut walk = StdRng::seed_from_u64(rng.random());
                let mut rate = (low + high) / 2.0;
                let mut second = 0.0;
                while second < duration {
                    let gap = Exp::new(rate).map_err(|e| WorkloadError::Invalid(e.to_string()))?;
                    let end = (second + 1.0).min(duration);
                    fill(&mut out, second, end, || gap.sample(rng));
                    rate += walk.random_range(-1.0..=1.0) * step;
                    rate = if rate > high { 2.0 * high - rate } else { rate };
                    rate = if rate < low { 2.0 * low - rate } else { rate };
                    rate = rate.clamp(low, high);
                    second = end;
                }
            }
            Arrivals::Trace { trace, speedup, repeat } => {
                let speedup = positive("speedup", *speedup)?;
                let times = trace.times()?;
                let first = times.first().copied().unwrap_or(0.0);
                let offsets: Vec<f64> = times.iter().map(|t| (t - first) / speedup).collect();
                let span = offsets.last().copied().unwrap_or(0.0);
                // A copy lasts the span and one mean gap, so the tiles keep the trace's rate.
                let period = span * offsets.len() as f64 / (offsets.len() as f64 - 1.0).max(1.0);
                let copies = if *repeat && period > 0.0 { (duration / period).ceil() as usize } else { 1 };
                let tiled = (0..copies).flat_map(|k| offsets.iter().map(move |t| t + k as f64 * period));
                out.extend(tiled.take_while(|t| *t < duration));
            }
        }
        Ok(out)
    }
}

/// Arrivals from `from` until `until`, each `gap()` after the last.
fn fill(out: &mut Vec<f64>, from: f64, until: f64, mut gap: impl FnMut() -> f64) {
    let mut t = from;
    loop {
        t += gap();
        if t >= until {
            return;
        }
        out.push(t);
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    fn gaps(a: &Arrivals, duration: f64) -> (f64, f64) {
        let times = a.generate(duration, &mut StdRng::seed_from_u64(3)).unwrap();
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
        let times = walk.generate(600.0, &mut StdRng::seed_from_u64(5)).unwrap();
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
        let mut rng = StdRng::seed_from_u64(0);
        assert_eq!(
            trace(false).generate(10.0, &mut rng).unwrap(),
            vec![0.0, 0.5, 2.0],
            "ends with the trace"
        );
        // Span 2 s over 2 gaps: each copy lasts 3 s (the span and one mean gap).
        let looped = trace(true).generate(7.0, &mut rng).unwrap();
        assert_eq!(looped, vec![0.0, 0.5, 2.0, 3.0, 3.5, 5.0, 6.0, 6.5]);
        let sped = Arrivals::Trace { trace: Trace::new(&path), speedup: 2.0, repeat: true };
        assert_eq!(sped.generate(2.0, &mut rng).unwrap(), vec![0.0, 0.25, 1.0, 1.5, 1.75]);
    }

    #[test]
    fn invalid_parameters_are_errors() {
        let mut rng = StdRng::seed_from_u64(0);
        assert!(Arrivals::Poisson { rate: 0.0 }.generate(1.0, &mut rng).is_err());
        assert!(Arrivals::Gamma { rate: 1.0, cv: -1.0 }.generate(1.0, &mut rng).is_err());
    }
}
