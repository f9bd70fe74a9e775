//! Each number field's default and bounds ([`Bounded`]) and each true-or-false field's value when
//! absent ([`Switch`]), as unit types the request types name and the OpenAPI document shows.

use super::bounds::{Bounded, Range, Switch};

/// Field types: each a unit type implementing `$trait` with `$value` as its `$item`; its doc line
/// is the field's description in the OpenAPI document.
macro_rules! field_types {
    ($trait:ident, $item:ident: $ty:ty; $($(#[doc = $doc:literal])* $name:ident = $value:expr;)*) => {$(
        $(#[doc = $doc])*
        #[derive(Debug)]
        pub(crate) struct $name;

        impl $trait for $name {
            const $item: $ty = $value;
            const ABOUT: &str = concat!($($doc),*);
        }
    )*};
}

// Each number field's default and bounds ([`Bounded`]).
field_types! {
    Bounded, RANGE: Range;
    /// Most tokens generated per choice, up to the model's context; by default all the room
    /// the prompt leaves in it. At least 1, but 0 with completions' `echo` (the prompt only
    /// scored).
    MaxTokens = Range::whole(None, 0.0, f64::INFINITY);
    /// Most tokens generated, up to the model's context; by default all the room the input
    /// leaves in it.
    MaxOutputTokens = Range::whole(None, 1.0, f64::INFINITY);
    /// 0 is greedy.
    Temperature = Range::number(Some(1.0), 0.0, 2.0);
    /// Nucleus sampling: the smallest set of tokens this likely; above 0.
    TopP = Range::number(Some(1.0), 1e-6, 1.0);
    /// The k likeliest tokens; 0 is off (llama-server's and vLLM's field, not OpenAI's).
    TopK = Range::whole(Some(0.0), 0.0, 1e6);
    /// Tokens at least this likely relative to the likeliest; 0 is off (not OpenAI's field).
    MinP = Range::number(Some(0.0), 0.0, 1.0);
    /// OpenAI's penalty of tokens already generated (once, or per time).
    Penalty = Range::number(Some(0.0), -2.0, 2.0);
    /// The sampler's seed (choice i takes seed + i); without one, every call samples afresh.
    Seed = Range::whole(None, 0.0, 9.0e15);
    /// Choices per prompt.
    Choices = Range::whole(Some(1.0), 1.0, 16.0);
    /// Alternatives per token in chat (OpenAI's limit).
    TopLogprobs = Range::whole(Some(0.0), 0.0, 20.0);
    /// Alternatives per token in completions, where `logprobs` is their number (OpenAI's limit).
    CompletionLogprobs = Range::whole(None, 0.0, 5.0);
    /// The answer's deadline, in ms from arrival (at most a day).
    SloMs = Range::number(None, 0.0, 86_400_000.0);
    /// What an answer in time is worth to the caller.
    Utility = Range::number(Some(1.0), 0.0, 1e6);
    /// The best this many results; all when absent.
    TopN = Range::whole(None, 1.0, 1e6);
    /// Each text is cut to this many tokens (Cohere's).
    TokensPerText = Range::whole(None, 1.0, f64::INFINITY);
    /// Each document is cut to this many tokens before it is scored (default: the model's
    /// longest input, past which every pair is cut anyway).
    TokensPerDocument = Range::whole(None, 1.0, f64::INFINITY);
}

// Each true-or-false field's value when absent ([`Switch`]).
field_types! {
    Switch, DEFAULT: bool;
    /// Morph's extension (TEI's on /embed): cut inputs longer than the longest input served
    /// (`/info`'s `max_input_length`) instead of refusing them.
    Truncate = false;
    /// Unit-length vectors.
    Normalize = true;
    /// The tokenizer's special tokens around each input, as the model sees it.
    AddSpecialTokens = true;
    /// Leave the special tokens out of the text.
    SkipSpecialTokens = true;
    /// Server-sent events, ending with `data: [DONE]`.
    Stream = false;
    /// The classifier's logits instead of its scores (softmax, or sigmoid for one output).
    RawScores = false;
    /// Each answer carries its text.
    ReturnText = false;
    /// Each result carries its document.
    ReturnDocuments = false;
    /// A last chunk with the call's token counts.
    IncludeUsage = false;
}
