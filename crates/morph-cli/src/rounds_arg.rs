//! `--rounds`: which ShareGPT conversations' rounds a command uses, by the predictor's
//! conversation-level split (`morph_train::predictor::dataset::Rounds`).

use clap::builder::{PossibleValuesParser, TypedValueParser};
use morph_train::predictor::dataset::Rounds;

/// `--rounds`'s parser: heldout (the validation and test splits, which the predictor never
/// saw), train (the training split only) or all; `--help` lists them.
pub(crate) fn rounds() -> impl TypedValueParser<Value = Rounds> {
    PossibleValuesParser::new(["heldout", "train", "all"])
        .map(|s| s.parse().expect("one of the listed values"))
}
