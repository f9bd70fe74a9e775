//! What a decoder's generations cost on its instances, in the terms SSJF weighs a job by: one
//! sequence's decode step (the time an output token takes alone, `K(1)`) and a prompt token's
//! prefill. The live server measures them when it starts; the simulator reads them off its cost
//! model.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GenerationCosts {
    /// One decode step of one sequence, in ms: SSJF's `K(1)`.
    pub step_ms: f64,
    /// Prefill per prompt token, in ms; `None` where a prompt's prefill is priced whatever its
    /// length (SSJF's constant `C`), so no token weighs more than another.
    pub prefill_token_ms: Option<f64>,
}

impl GenerationCosts {
    /// An uncached prompt token's weight in output tokens (its prefill over a decode step), if
    /// the prefill is priced by tokens.
    pub fn prefill_weight(&self) -> Option<f64> {
        self.prefill_token_ms.filter(|_| self.step_ms > 0.0).map(|ms| ms / self.step_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_tokens_weight_is_its_prefill_over_a_step() {
        let costs = GenerationCosts { step_ms: 32.0, prefill_token_ms: Some(4.0) };
        assert_eq!(costs.prefill_weight(), Some(0.125));
        assert_eq!(GenerationCosts { prefill_token_ms: None, ..costs }.prefill_weight(), None);
        assert_eq!(GenerationCosts { step_ms: 0.0, ..costs }.prefill_weight(), None);
    }
}
