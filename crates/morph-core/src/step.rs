//! A decoder instance's step as the policy decides it: between two iterations of a continuous
//! batch the driver reports what each sequence would feed next ([`Pending`]), and the policy
//! answers with the whole next step ([`StepPlan`]): which sequences compute in it and how many
//! prompt tokens each prefilling one feeds. The deployment bounds a step ([`StepBudget`]).

use serde::{Deserialize, Serialize};

use crate::request::RequestId;

/// A sequence of a continuous batch between two iterations: the prompt tokens it has still to
/// feed (0: its prompt is all fed and it decodes, one token a step) and the most of them its
/// next step can feed (`piece`: the engine's chunk, cut where a kept prefix of the cache may end).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pending {
    pub request: RequestId,
    pub prompt_left: u32,
    pub piece: u32,
}

impl Pending {
    /// A sequence not fed yet, whose engine has not said how it cuts the prompt (it has not
    /// looked for a kept prefix yet): `prompt_len` tokens left, all of them its piece (a policy
    /// bounds it by the chunk).
    pub fn fresh(request: RequestId, prompt_len: u32) -> Self {
        Self { request, prompt_left: prompt_len, piece: prompt_len }
    }

    pub fn decodes(&self) -> bool {
        self.prompt_left == 0
    }
}

/// One sequence's part in a step: a decoding one feeds its last token; a prefilling one feeds
/// `tokens` of its prompt (at most its piece: the engine cuts there).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepFeed {
    pub request: RequestId,
    pub tokens: u32,
}

/// The next step of a decoder instance: the sequences that compute in it, with what each feeds.
/// Sequences of the batch it leaves out wait, as they are, for a later step.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepPlan {
    pub feeds: Vec<StepFeed>,
}

impl StepPlan {
    /// Every one of `requests` feeds whatever its engine would (its whole next piece): a static
    /// batch's step.
    pub fn all(requests: &[RequestId]) -> Self {
        Self { feeds: requests.iter().map(|&request| StepFeed { request, tokens: u32::MAX }).collect() }
    }

    pub fn tokens_of(&self, request: RequestId) -> Option<u32> {
        self.feeds.iter().find(|f| f.request == request).map(|f| f.tokens)
    }
}

/// What one step of a decoder instance may feed, from its deployment (`morph serve
/// --prefill-chunk`, and whether its cores are shared with other models).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepBudget {
    /// Most prompt tokens one sequence feeds in a step (0: its whole prompt).
    pub prefill_chunk: u32,
    /// Most prompt tokens a step feeds in all, decodes aside (`None`: each prefilling sequence
    /// its piece). A step holding shared cores holds them to its end, so there the step's pieces
    /// share one chunk.
    pub step_prompt_tokens: Option<u32>,
}

impl StepBudget {
    /// Whole prompts, every sequence in every step: a step bounded by nothing.
    pub const UNBOUNDED: StepBudget = StepBudget { prefill_chunk: 0, step_prompt_tokens: None };

    /// Most prompt tokens one sequence feeds in a step.
    pub fn chunk(&self) -> u32 {
        if self.prefill_chunk == 0 { u32::MAX } else { self.prefill_chunk }
    }
}

impl Default for StepBudget {
    fn default() -> Self {
        Self::UNBOUNDED
    }
}
