//! Choosing the next token from logits with llama.cpp's sampler chain (the one llama-server
//! runs): the caller's logit bias, repetition penalties over the tokens produced so far, then
//! top-k, top-p and min-p cuts, the temperature, and a seeded draw; greedy (the largest logit
//! after the bias and penalties) at temperature 0. A generation under a grammar
//! ([`super::grammar`]) draws only among the tokens the grammar lets through.

use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;
use llama_cpp_2::token::logit_bias::LlamaLogitBias;
use serde::{Deserialize, Serialize};

use crate::grammar::{Constraint, Grammar};

/// How a generation's tokens are drawn (the OpenAI API's sampling fields).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SamplingParams {
    /// 0 is greedy decoding.
    pub temperature: f32,
    /// Keep the most likely tokens whose probabilities sum to at least this (1 keeps all).
    pub top_p: f32,
    /// Keep only the this many most likely tokens (0 keeps all).
    pub top_k: u32,
    /// Drop tokens less likely than this fraction of the most likely one (0 keeps all).
    pub min_p: f32,
    /// Subtracted from the logit of every token already produced (OpenAI's `presence_penalty`).
    pub presence_penalty: f32,
    /// Subtracted from a token's logit once per time it was produced (`frequency_penalty`).
    pub frequency_penalty: f32,
    pub seed: u64,
}

impl Default for SamplingParams {
    fn default() -> Self {
        Self {
            temperature: 0.0,
            top_p: 1.0,
            top_k: 0,
            min_p: 0.0,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            seed: 0,
        }
    }
}

/// Added to tokens' logits before any other stage of the chain (OpenAI's `logit_bias`: each
/// token id with a bias from −100, which bans it, to 100, which all but forces it).
pub type LogitBias = Vec<(u32, f32)>;

/// Tokens back that the repetition penalties look at (llama.cpp's default window).
const PENALTY_WINDOW: i32 = 64;

/// One generation's sampler: llama.cpp's chain for its parameters, built at the first draw
/// (the penalties need the vocabulary's size), remembering the tokens it drew; the candidates'
/// buffer (one entry per vocabulary token) is kept from draw to draw.
#[derive(Debug)]
pub struct Sampler {
    params: SamplingParams,
    bias: LogitBias,
    chain: Option<LlamaSampler>,
    candidates: LlamaTokenDataArray,
    constraint: Option<Constraint>,
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
        Self {
            params,
            bias: LogitBias::new(),
            chain: None,
            candidates: LlamaTokenDataArray::new(Vec::new(), false),
            constraint: None,
        }
    }

    /// A sampler whose tokens keep the text within `grammar`, if there is one.
    pub fn constrained(params: SamplingParams, grammar: Option<&Grammar>) -> Self {
        Self { constraint: grammar.map(Grammar::start), ..Self::new(params) }
    }

    /// This sampler with `bias` added to its tokens' logits.
    pub fn with_bias(self, bias: LogitBias) -> Self {
        Self { bias, ..self }
    }

    /// Draws the next token from `logits` (one per vocabulary entry) and remembers it.
    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        let (params, bias) = (self.params, &self.bias);
        let chain = self.chain.get_or_insert_with(|| chain(params, bias, logits.len()));
        let candidates = &mut self.candidates;
        candidates.data.clear();
        let entries = logits.iter().enumerate();
        candidates
            .data
            .extend(entries.map(|(i, &logit)| LlamaTokenData::new(LlamaToken(i as i32), logit, 0.0)));
        if let Some(constraint) = &mut self.constraint {
            let allowed = constraint.allowed();
            candidates.data.retain(|c| allowed.is_allowed(c.id().0 as u32));
            if candidates.data.is_empty() {
                // Only if the vocabulary could not be read: nothing to draw from.
                return argmax(logits);
            }
        }
        (candidates.selected, candidates.sorted) = (None, false);
        candidates.apply_sampler(chain);
        // Every stage keeps at least one candidate and the chain ends in a draw, so one is
        // selected; the largest logit is the answer should llama.cpp ever not choose.
        let token = candidates.selected_token().map_or_else(|| argmax(logits), |t| t.0 as u32);
        chain.accept(LlamaToken(token as i32));
        if let Some(constraint) = &mut self.constraint {
            constraint.accept(token);
        }
        token
    }
}

/// llama.cpp's chain for `params` and `bias` over a vocabulary of `vocab` tokens, in
/// llama-server's order (the bias first).
fn chain(params: SamplingParams, bias: &[(u32, f32)], vocab: usize) -> LlamaSampler {
    let mut stages = Vec::new();
    if !bias.is_empty() {
        let biases: Vec<LlamaLogitBias> =
            bias.iter().map(|&(token, bias)| LlamaLogitBias::new(LlamaToken(token as i32), bias)).collect();
        stages.push(LlamaSampler::logit_bias(vocab as i32, &biases));
    }
    stages.push(LlamaSampler::penalties(
        vocab as i32,
        PENALTY_WINDOW,
        1.0,
        params.frequency_penalty,
        params.presence_penalty,
    ));
    if params.temperature <= 0.0 {
        stages.push(LlamaSampler::greedy());
        return LlamaSampler::chain_simple(stages);
    }
    if params.top_k > 0 {
        stages.push(LlamaSampler::top_k(params.top_k as i32));
    }
    stages.push(LlamaSampler::top_p(params.top_p, 1));
    if params.min_p > 0.0 {
        stages.push(LlamaSampler::min_p(params.min_p, 1));
    }
    stages.push(LlamaSampler::temp(params.temperature));
    // llama.cpp's seeds are 32 bits: both halves of ours count.
    stages.push(LlamaSampler::dist((params.seed ^ (params.seed >> 32)) as u32));
    LlamaSampler::chain_simple(stages)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draws(params: SamplingParams, logits: &[f32], n: usize) -> Vec<u32> {
        let mut s = Sampler::new(params);
        (0..n).map(|_| s.sample(logits)).collect()
    }

    #[test]
    fn greedy_takes_the_largest_and_top_p_cuts_the_tail() {
        let logits = [0.1, 3.0, 2.9, -5.0];
        assert_eq!(Sampler::new(SamplingParams::default()).sample(&logits), 1);
        let sampled = SamplingParams { temperature: 1.0, ..SamplingParams::default() };
        // top_p small: only the most likely token is left, whatever the seed.
        for seed in 0..20 {
            assert_eq!(draws(SamplingParams { top_p: 0.1, seed, ..sampled }, &logits, 1), [1]);
        }
        // With the whole distribution both likely tokens come up, the same way for one seed.
        let a = draws(SamplingParams { seed: 7, ..sampled }, &logits, 200);
        assert_eq!(a, draws(SamplingParams { seed: 7, ..sampled }, &logits, 200));
        assert!(a.contains(&1) && a.contains(&2) && !a.contains(&3));
        // top_k 1 and min_p near 1 keep only the most likely token.
        assert!(draws(SamplingParams { top_k: 1, ..sampled }, &logits, 50).iter().all(|&t| t == 1));
        assert!(draws(SamplingParams { min_p: 0.99, ..sampled }, &logits, 50).iter().all(|&t| t == 1));
    }

    #[test]
    fn a_bias_bans_or_forces_a_token() {
        let logits = [0.1, 3.0, 2.9, -5.0];
        let greedy =
            |bias: LogitBias| Sampler::new(SamplingParams::default()).with_bias(bias).sample(&logits);
        assert_eq!(greedy(vec![(1, -100.0)]), 2);
        assert_eq!(greedy(vec![(3, 100.0)]), 3);
        let sampled = SamplingParams { temperature: 1.0, seed: 3, ..SamplingParams::default() };
        let mut s = Sampler::new(sampled).with_bias(vec![(1, -100.0), (2, -100.0)]);
        assert!((0..100).map(|_| s.sample(&logits)).all(|t| t == 0 || t == 3));
    }

    #[test]
    fn penalties_steer_greedy_decoding_away_from_tokens_already_drawn() {
        let logits = [0.0, 3.0, 2.5, 2.2];
        assert_eq!(draws(SamplingParams::default(), &logits, 3), [1, 1, 1]);
        // Presence: once drawn, a token loses 1 whatever its count: 1 (3.0 → 2.0) gives way to 2,
        // then 2 (2.5 → 1.5) to 3 (2.2).
        let presence = SamplingParams { presence_penalty: 1.0, ..SamplingParams::default() };
        assert_eq!(draws(presence, &logits, 3), [1, 2, 3]);
        // Frequency: 0.3 per time drawn, so token 1 (3.0, 2.7, 2.4) gives way to 2 (2.5) at the third draw.
        let frequency = SamplingParams { frequency_penalty: 0.3, ..SamplingParams::default() };
        assert_eq!(draws(frequency, &logits, 3), [1, 1, 2]);
    }
}
