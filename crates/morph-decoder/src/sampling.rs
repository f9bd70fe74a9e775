//! Choosing the next token from logits: greedy (temperature 0), or sampled from the
//! temperature-scaled distribution cut to its top-p nucleus, with a seeded generator.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SamplingParams {
    /// 0 is greedy decoding.
    pub temperature: f32,
    /// Keep the most likely tokens whose probabilities sum to at least this (1 keeps all).
    pub top_p: f32,
    pub seed: u64,
}

impl Default for SamplingParams {
    fn default() -> Self {
        Self { temperature: 0.0, top_p: 1.0, seed: 0 }
    }
}

#[derive(Debug, Clone)]
pub struct Sampler {
    params: SamplingParams,
    rng: StdRng,
}

/// The index of the largest logit (the first of equals).
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &l) in logits.iter().enumerate() {
        if l > logits[best] {
            best = i;
        }
    }
    best as u32
}

impl Sampler {
    pub fn new(params: SamplingParams) -> Self {
        Self { params, rng: StdRng::seed_from_u64(params.seed) }
    }

    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        if self.params.temperature <= 0.0 {
            return argmax(logits);
        }
        let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut probs: Vec<(u32, f32)> = logits
            .iter()
            .enumerate()
            .map(|(i, &l)| (i as u32, ((l - max) / self.params.temperature).exp()))
            .collect();
        probs.sort_by(|a, b| b.1.total_cmp(&a.1));
        let total: f32 = probs.iter().map(|p| p.1).sum();
        let mut kept = 0.0;
        let mut cut = probs.len();
        for (i, p) in probs.iter().enumerate() {
            kept += p.1 / total;
            if kept >= self.params.top_p {
                cut = i + 1;
                break;
            }
        }
        let nucleus = &probs[..cut];
        let mass: f32 = nucleus.iter().map(|p| p.1).sum();
        let mut draw = self.rng.random::<f32>() * mass;
        for &(id, p) in nucleus {
            if draw < p {
                return id;
            }
            draw -= p;
        }
        nucleus[nucleus.len() - 1].0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_takes_the_largest_and_top_p_cuts_the_tail() {
        let logits = [0.1, 3.0, 2.9, -5.0];
        assert_eq!(Sampler::new(SamplingParams::default()).sample(&logits), 1);
        // top_p small: only the most likely token is left, whatever the seed.
        for seed in 0..20 {
            let mut s = Sampler::new(SamplingParams { temperature: 1.0, top_p: 0.1, seed });
            assert_eq!(s.sample(&logits), 1);
        }
        // With the whole distribution both likely tokens come up, the same way for one seed.
        let draws = |seed| {
            let mut s = Sampler::new(SamplingParams { temperature: 1.0, top_p: 1.0, seed });
            (0..200).map(|_| s.sample(&logits)).collect::<Vec<_>>()
        };
        let a = draws(7);
        assert_eq!(a, draws(7));
        assert!(a.contains(&1) && a.contains(&2) && !a.contains(&3));
    }
}
