//! `--rounds`: which ShareGPT conversations' rounds a command uses, by the predictor's
//! conversation-level split.

use clap::ValueEnum;
use morph_engine::predictor::dataset::{Split, split_of};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Rounds {
    /// The validation and test splits (by conversation), which the predictor never saw.
    Heldout,
    All,
}

impl Rounds {
    pub(crate) fn includes(self, conversation: &str) -> bool {
        self == Rounds::All || split_of(conversation) != Split::Train
    }
}
