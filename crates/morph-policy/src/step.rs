//! The rule that makes a decoder's next step ([`StepPlan`]) out of the sequences it holds, for
//! the policies that run continuous batches (SSJF and FCFS), live and simulated alike.

use morph_core::step::{Pending, StepBudget, StepFeed, StepPlan};
use serde::{Deserialize, Serialize};

/// How a step is filled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepRule {
    /// Most tokens one step feeds, its decodes counted (vLLM's token budget): every decoding
    /// sequence first, then prompt tokens in join order up to what is left, the last piece cut
    /// to fit. `None`: every decode, and prompt pieces whole in join order while they fit the
    /// deployment's step prompt tokens (the first always).
    pub tokens: Option<u32>,
}

impl StepRule {
    /// The next step over `pending` (in join order) within `budget`. Never empty while
    /// `pending` is not: the first prompt feeds at least one token.
    pub fn plan(self, budget: StepBudget, pending: &[Pending]) -> StepPlan {
        let decodes = pending.iter().filter(|p| p.decodes());
        let mut feeds: Vec<StepFeed> = decodes.map(|p| StepFeed { request: p.request, tokens: 1 }).collect();
        let cap = budget.step_prompt_tokens.unwrap_or(u32::MAX);
        // Prompt tokens the step may still take.
        let mut room = match self.tokens {
            Some(tokens) => cap.min(tokens.saturating_sub(feeds.len() as u32)),
            None => cap,
        };
        let mut fed_any = false;
        for p in pending.iter().filter(|p| !p.decodes()) {
            let piece = p.piece.min(p.prompt_left).min(budget.chunk()).max(1);
            let tokens = match self.tokens {
                // A piece goes whole or waits; the first always goes.
                None if fed_any && piece > room => continue,
                None => piece,
                Some(_) if room == 0 && (fed_any || !feeds.is_empty()) => break,
                Some(_) => piece.min(room).max(1),
            };
            room = room.saturating_sub(tokens);
            fed_any = true;
            feeds.push(StepFeed { request: p.request, tokens });
        }
        StepPlan { feeds }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use morph_core::RequestId;

    fn decoding(id: u64) -> Pending {
        Pending { request: RequestId(id), prompt_left: 0, piece: 0 }
    }

    fn prompt(id: u64, left: u32, piece: u32) -> Pending {
        Pending { request: RequestId(id), prompt_left: left, piece }
    }

    fn fed(plan: &StepPlan) -> Vec<(u64, u32)> {
        plan.feeds.iter().map(|f| (f.request.0, f.tokens)).collect()
    }

    #[test]
    fn pieces_go_whole_while_they_fit_the_steps_prompt_tokens() {
        let pending = [prompt(0, 48, 48), decoding(1), prompt(2, 30, 30), prompt(3, 16, 16), decoding(4)];
        let shared = StepBudget { prefill_chunk: 48, step_prompt_tokens: Some(48) };
        let plan = StepRule::default().plan(shared, &pending);
        assert_eq!(fed(&plan), [(1, 1), (4, 1), (0, 48)], "decodes, then the first piece fills the chunk");
        let later = [prompt(2, 30, 30), prompt(3, 16, 16), prompt(5, 48, 48)];
        assert_eq!(fed(&StepRule::default().plan(shared, &later)), [(2, 30), (3, 16)], "30 + 16 fit, 48 not");
        let alone =
            StepRule::default().plan(StepBudget { prefill_chunk: 48, step_prompt_tokens: None }, &pending);
        assert_eq!(alone.feeds.len(), 5, "a step of its own host's cores feeds every piece");
    }

    #[test]
    fn a_token_budget_feeds_decodes_first_and_cuts_the_last_piece() {
        let pending = [prompt(0, 300, 256), decoding(1), prompt(2, 200, 200), decoding(3)];
        let chunked = StepBudget { prefill_chunk: 256, step_prompt_tokens: None };
        let plan = StepRule { tokens: Some(320) }.plan(chunked, &pending);
        assert_eq!(fed(&plan), [(1, 1), (3, 1), (0, 256), (2, 62)]);
        let full = StepRule { tokens: Some(2) }.plan(chunked, &pending);
        assert_eq!(fed(&full), [(1, 1), (3, 1)], "decodes take the whole budget: prompts wait");
        let alone = StepRule { tokens: Some(1) }.plan(chunked, &[prompt(0, 300, 256)]);
        assert_eq!(fed(&alone), [(0, 1)]);
        assert!(
            StepRule { tokens: Some(0) }.plan(chunked, &[prompt(0, 9, 9)]).feeds.len() == 1,
            "never empty"
        );
    }
}
