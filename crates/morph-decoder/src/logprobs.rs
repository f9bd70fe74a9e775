//! Token log-probabilities (the OpenAI API's `logprobs`): under the model's own distribution,
//! the raw logits' softmax before any penalty, temperature or cut, as vLLM reports them.

/// The log-probability of the token drawn, and of the most likely tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenLogprob {
    pub logprob: f32,
    /// The `top` most likely tokens and their log-probabilities, most likely first.
    pub top: Vec<(u32, f32)>,
}

/// `token`'s log-probability under `logits` (one per vocabulary entry), with the `top` most
/// likely tokens'.
pub fn token_logprob(logits: &[f32], token: u32, top: usize) -> TokenLogprob {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    // log Σ exp(l) = max + log Σ exp(l − max), in f64 over a vocabulary of tens of thousands.
    let sum: f64 = logits.iter().map(|&l| f64::from(l - max).exp()).sum();
    let log_total = f64::from(max) + sum.ln();
    let logprob = |id: u32| (f64::from(logits[id as usize]) - log_total) as f32;
    let mut ids: Vec<u32> = (0..logits.len() as u32).collect();
    let top = top.min(ids.len());
    let by_logit = |a: &u32, b: &u32| logits[*b as usize].total_cmp(&logits[*a as usize]);
    if top > 0 && top < ids.len() {
        ids.select_nth_unstable_by(top - 1, by_logit);
    }
    ids.truncate(top);
    ids.sort_by(by_logit);
    TokenLogprob { logprob: logprob(token), top: ids.into_iter().map(|id| (id, logprob(id))).collect() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logprobs_are_the_softmax_of_the_raw_logits_and_the_top_come_best_first() {
        // Probabilities 0.5, 0.25, 0.125, 0.125.
        let logits = [3.0_f32.ln() + 2.0_f32.ln(), 3.0_f32.ln() + 1.0_f32.ln(), 1.5_f32.ln(), 1.5_f32.ln()];
        let lp = token_logprob(&logits, 1, 2);
        assert!((lp.logprob - 0.25_f32.ln()).abs() < 1e-6, "{lp:?}");
        assert_eq!(lp.top.iter().map(|t| t.0).collect::<Vec<_>>(), [0, 1]);
        assert!((lp.top[0].1 - 0.5_f32.ln()).abs() < 1e-6);
        assert!(token_logprob(&logits, 3, 0).top.is_empty());
        assert_eq!(token_logprob(&logits, 3, 9).top.len(), 4);
    }
}
