//! `--rounds`: which ShareGPT conversations' rounds a command uses, by the predictor's
//! conversation-level split.

use clap::ValueEnum;
use morph_train::predictor::{dataset::Split, dataset::split_of};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Rounds {
    /// The validation and test splits (by conversation), which the predictor never saw.
    Heldout,
    /// The training split only (what `morph train predictor` learns from).
    Train,
    All,
}

impl Rounds {
    pub(crate) fn includes(self, conversation: &str) -> bool {
        match self {
            Rounds::All => true,
            Rounds::Heldout => split_of(conversation) != Split::Train,
            Rounds::Train => split_of(conversation) == Split::Train,
        }
    }
}
