//! `morph`: serve transformer models that adapt to the shape of each request.

mod bench;
mod model_args;
mod plots;
mod profile;
mod serve;
mod simulate;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "morph", version, about = "Serve transformer encoders with shape-aware scheduling", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start the HTTP server (fetches the default model on first run).
    Serve(serve::ServeArgs),
    /// Download the model into MORPH_HOME (default ~/.cache/morph) and print where it is.
    Fetch(model_args::ModelArgs),
    /// Measure the engine's median batch latency over a grid of lengths and batch sizes.
    Profile(profile::ProfileArgs),
    /// Send an open-loop request stream to a running server and report latency.
    Bench(bench::BenchArgs),
    /// Run a scenario's policies side by side on identical request streams, in virtual time.
    Simulate(simulate::SimulateArgs),
}

fn main() -> anyhow::Result<()> {
    morph_engine::tuning::reexec_tuned();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().command {
        Command::Serve(args) => serve::run(args),
        Command::Fetch(args) => {
            let files = args.fetch()?;
            println!("{}", files.dir.display());
            Ok(())
        }
        Command::Profile(args) => profile::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Simulate(args) => simulate::run(args),
    }
}
