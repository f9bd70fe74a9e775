//! `morph train`: the models Morph uses to schedule. The CLI parses the flags; the runs are
//! in `morph-train` (`lengths`, `predictor_run`, `adapt`).

mod adapt;
mod lengths;
mod predictor;

use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub(crate) enum TrainCommand {
    /// Train the output-length predictor (SSJF §3.1) and print the objective ablation.
    Predictor(predictor::PredictorArgs),
    /// Record the served decoder's own output lengths for ShareGPT prompts: the predictor's
    /// training data for the model being served (greedy decoding, continuous batching).
    Lengths(lengths::LengthsArgs),
    /// Train OTAS's task heads on the shared encoder under each token plan, and profile every
    /// task's accuracy per plan (the policy's and the simulator's accuracy table).
    Adapt(adapt::AdaptArgs),
}

pub(crate) fn run(command: TrainCommand) -> anyhow::Result<()> {
    match command {
        TrainCommand::Predictor(args) => predictor::run(args),
        TrainCommand::Lengths(args) => lengths::run(args),
        TrainCommand::Adapt(args) => adapt::run(args),
    }
}
