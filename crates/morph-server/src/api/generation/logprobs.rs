//! Token log-probabilities in the OpenAI formats: chat's `{"content": [{token, logprob, bytes,
//! top_logprobs}]}` and completions' `{tokens, token_logprobs, top_logprobs, text_offset}`, for
//! a whole choice or one streamed token; an echoed prompt's tokens come first in completions',
//! the first with `null`s (nothing before it scores it).

use std::collections::BTreeMap;

use morph_decoder::TokenLogprob;
use serde::Serialize;
use utoipa::ToSchema;

use crate::infer::{GenerationFormat, Generator};

/// One token's log-probability and its alternatives, with their texts.
#[derive(Debug, Clone)]
pub(super) struct Logprobbed {
    token: Candidate,
    top: Vec<Candidate>,
    /// It has no log-probability: a prompt's first token.
    unscored: bool,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct Candidate {
    token: String,
    logprob: f32,
    bytes: Vec<u8>,
}

impl Logprobbed {
    /// Token `id`'s entry, its alternatives' ids read as text by the generator's tokenizer.
    pub(super) fn new(generator: &Generator, id: u32, logprob: &TokenLogprob) -> Self {
        let top = logprob.top.iter().map(|&(id, lp)| Candidate::new(generator, id, lp)).collect();
        Self { token: Candidate::new(generator, id, logprob.logprob), top, unscored: false }
    }

    /// An echoed prompt's `tokens`: the first unscored, each after it with its log-probability
    /// in `scored` (in order).
    pub(super) fn prompt(generator: &Generator, tokens: &[u32], scored: &[TokenLogprob]) -> Vec<Self> {
        let Some((&first, rest)) = tokens.split_first() else { return Vec::new() };
        let first = Self { token: Candidate::new(generator, first, 0.0), top: Vec::new(), unscored: true };
        let rest = rest.iter().zip(scored).map(|(&id, logprob)| Self::new(generator, id, logprob));
        std::iter::once(first).chain(rest).collect()
    }
}

impl Candidate {
    fn new(generator: &Generator, id: u32, logprob: f32) -> Self {
        let token = generator.token_text(id);
        Candidate { bytes: token.as_bytes().to_vec(), token, logprob }
    }
}

/// A choice's (or a chunk's) `logprobs`, in its format.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub(crate) enum ChoiceLogprobs {
    Chat {
        content: Vec<ChatLogprob>,
    },
    Completion {
        tokens: Vec<String>,
        /// `null` for an echoed prompt's first token.
        token_logprobs: Vec<Option<f32>>,
        top_logprobs: Vec<Option<BTreeMap<String, f32>>>,
        /// Where each token's text starts in the choice's text (in bytes).
        text_offset: Vec<usize>,
    },
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ChatLogprob {
    #[serde(flatten)]
    token: Candidate,
    top_logprobs: Vec<Candidate>,
}

impl ChoiceLogprobs {
    /// The `logprobs` of `tokens` in `format`; the first token's text starts at `offset`.
    pub(super) fn of(format: GenerationFormat, tokens: Vec<Logprobbed>, offset: usize) -> Self {
        match format {
            GenerationFormat::Chat => ChoiceLogprobs::Chat {
                content: tokens
                    .into_iter()
                    .map(|t| ChatLogprob { token: t.token, top_logprobs: t.top })
                    .collect(),
            },
            GenerationFormat::Completion => {
                let mut text_offset = Vec::with_capacity(tokens.len());
                let mut at = offset;
                for t in &tokens {
                    text_offset.push(at);
                    at += t.token.token.len();
                }
                fn scored(t: &Logprobbed) -> Option<&Logprobbed> {
                    (!t.unscored).then_some(t)
                }
                ChoiceLogprobs::Completion {
                    token_logprobs: tokens.iter().map(|t| scored(t).map(|t| t.token.logprob)).collect(),
                    top_logprobs: tokens
                        .iter()
                        .map(|t| {
                            scored(t).map(|t| t.top.iter().map(|c| (c.token.clone(), c.logprob)).collect())
                        })
                        .collect(),
                    tokens: tokens.into_iter().map(|t| t.token.token).collect(),
                    text_offset,
                }
            }
        }
    }
}
