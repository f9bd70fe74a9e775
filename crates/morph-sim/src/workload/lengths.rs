//! Input-length distributions (tokens, special tokens included).

use std::path::PathBuf;

use rand::Rng;
use rand_distr::{Distribution, LogNormal, Uniform};
use serde::Deserialize;

use super::WorkloadError;
use super::trace::Trace;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Lengths {
    Fixed {
        len: u32,
    },
    Uniform {
        min: u32,
        max: u32,
    },
    /// Arlo's Twitter trace: log-normal with median 21 and p98 72 tokens, cut at 125, then
    /// rescaled so that 125 maps to `max` (Arlo §5: "recalibrate ... to span up to 512").
    Twitter {
        #[serde(default = "twitter_max")]
        max: u32,
    },
    /// A trace's input-length column, in trace order, cycled if the workload is longer.
    Trace {
        #[serde(flatten)]
        trace: Trace,
    },
    /// The token lengths of a text corpus (see [`super::corpus`]), drawn uniformly. Resolved into
    /// [`Lengths::Empirical`] when the scenario is loaded, with the model's tokenizer.
    Corpus {
        path: PathBuf,
    },
    /// Drawn uniformly from these lengths.
    Empirical {
        values: Vec<u32>,
    },
}

fn twitter_max() -> u32 {
    512
}

/// Twitter trace shape (Arlo §2.2, Fig. 1): median 21, 98th percentile 72, maximum about 125.
const TWITTER_MEDIAN: f64 = 21.0;
const TWITTER_P98: f64 = 72.0;
const TWITTER_MAX: f64 = 125.0;
/// z-score of the 98th percentile of a standard normal.
const Z98: f64 = 2.053_748_9;

impl Lengths {
    /// `n` lengths drawn from `rng` ([`Lengths::sampler`]).
    pub fn generate(&self, n: usize, rng: &mut impl Rng) -> Result<Vec<u32>, WorkloadError> {
        let sampler = self.sampler()?;
        Ok((0..n).map(|i| sampler.sample(i, rng)).collect())
    }

    /// Draws one length at a time: request `index` of a stream.
    pub fn sampler(&self) -> Result<LengthSampler, WorkloadError> {
        let invalid = |m: String| WorkloadError::Invalid(m);
        Ok(match self {
            Lengths::Fixed { len } => LengthSampler::Fixed((*len).max(1)),
            Lengths::Uniform { min, max } => LengthSampler::Uniform(
                Uniform::new_inclusive((*min).max(1), *max).map_err(|e| invalid(e.to_string()))?,
            ),
            Lengths::Twitter { max } => {
                let sigma = (TWITTER_P98 / TWITTER_MEDIAN).ln() / Z98;
                let d = LogNormal::new(TWITTER_MEDIAN.ln(), sigma).map_err(|e| invalid(e.to_string()))?;
                LengthSampler::Twitter { d, scale: f64::from(*max) / TWITTER_MAX, max: *max }
            }
            Lengths::Corpus { path } => {
                return Err(invalid(format!(
                    "corpus {} was not tokenized (load the scenario with a tokenizer)",
                    path.display()
                )));
            }
            Lengths::Empirical { values } => {
                if values.is_empty() {
                    return Err(invalid("empirical lengths need at least one value".into()));
                }
                LengthSampler::Drawn(values.clone())
            }
            Lengths::Trace { trace } => {
                let column = trace.input_lengths()?;
                if column.is_empty() {
                    return Err(invalid("the trace has no input lengths".into()));
                }
                LengthSampler::Cycled(column)
            }
        })
    }
}

/// A length distribution ready to draw from ([`Lengths::sampler`]).
#[derive(Debug, Clone)]
pub enum LengthSampler {
    Fixed(u32),
    Uniform(Uniform<u32>),
    Twitter {
        d: LogNormal<f64>,
        scale: f64,
        max: u32,
    },
    /// Drawn uniformly from the values.
    Drawn(Vec<u32>),
    /// The values in order, cycled: request `index` takes value `index mod len`.
    Cycled(Vec<u32>),
}

impl LengthSampler {
    /// The length of request `index` of a stream (at least 1).
    pub fn sample(&self, index: usize, rng: &mut impl Rng) -> u32 {
        match self {
            LengthSampler::Fixed(len) => *len,
            LengthSampler::Uniform(u) => u.sample(rng),
            LengthSampler::Twitter { d, scale, max } => {
                let len = d.sample(rng).clamp(1.0, TWITTER_MAX) * scale;
                (len.round() as u32).clamp(1, *max)
            }
            LengthSampler::Drawn(values) => values[rng.random_range(0..values.len())].max(1),
            LengthSampler::Cycled(values) => values[index % values.len()].max(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use morph_core::stats::percentile;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    #[test]
    fn twitter_lengths_have_the_papers_shape() {
        let mut rng = StdRng::seed_from_u64(1);
        let mut raw: Vec<f64> = Lengths::Twitter { max: 125 }
            .generate(100_000, &mut rng)
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect();
        raw.sort_by(f64::total_cmp);
        assert_eq!(percentile(&raw, 0.5), 21.0);
        assert!((percentile(&raw, 0.98) - 72.0).abs() <= 2.0, "{}", percentile(&raw, 0.98));
        assert_eq!(raw.last().copied(), Some(125.0));
        let scaled = Lengths::Twitter { max: 512 }.generate(1000, &mut rng).unwrap();
        assert!(scaled.iter().all(|l| (1..=512).contains(l)) && scaled.iter().any(|l| *l > 125));
    }
}
