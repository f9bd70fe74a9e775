//! `morph worker`: one pipeline-stage replica (or whole model) in its own process. The server
//! starts it; it connects back, builds its ONNX Runtime engine cold (weights from disk, graph
//! written and optimised; with --prepare the optimised graph is kept as a prepared artefact) or
//! warm (--prepared: the artefact from host memory, optimisation off), runs a first batch,
//! reports how long each step took, then runs batches until the server stops it.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use morph_core::{PlanId, UnitSpec};
use morph_engine::checkpoint::Checkpoint;
use morph_engine::fetch::{ModelSource, fetch, morph_home};
use morph_engine::ort_runtime::environment;
use morph_engine::remote::{Built, Endpoint, serve_worker};
use morph_engine::{EngineError, OrtEncoder, OrtRuntime, Pooling, Rows};

#[derive(Debug, Args)]
pub(crate) struct WorkerArgs {
    /// Where the server waits for this worker: unix:PATH or tcp:IP:PORT.
    #[arg(long)]
    connect: Endpoint,
    /// The model's local directory (config.json, model.safetensors).
    #[arg(long)]
    model: PathBuf,
    /// The ONNX Runtime shared library.
    #[arg(long)]
    ort_library: PathBuf,
    /// The unit this replica runs, as JSON (runtime shape, pipeline stage, threads), as the
    /// server writes it.
    #[arg(long)]
    unit: String,
    /// Token plans to compile besides the plain model, comma separated.
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    plans: Vec<i16>,
    /// Pooling of the last stage (default: the model's own).
    #[arg(long)]
    pooling: Option<Pooling>,
    /// Cold start that also saves the optimised graphs here (a prepared artefact).
    #[arg(long, conflicts_with = "prepared")]
    prepare: Option<PathBuf>,
    /// Warm start from the prepared artefact here.
    #[arg(long)]
    prepared: Option<PathBuf>,
}

pub(crate) fn run(args: WorkerArgs) -> anyhow::Result<()> {
    let unit: UnitSpec = serde_json::from_str(&args.unit).context("--unit")?;
    let mut plans: Vec<PlanId> = args.plans.iter().map(|p| PlanId(*p)).collect();
    plans.push(PlanId::PLAIN);
    plans.sort_unstable();
    plans.dedup();
    serve_worker(&args.connect, || build(&args, unit, &plans))
        .with_context(|| format!("worker for {unit} at {}", args.connect))
}

fn build(args: &WorkerArgs, unit: UnitSpec, plans: &[PlanId]) -> Result<Built, EngineError> {
    let load = |e: morph_engine::fetch::FetchError| EngineError::Load(e.to_string());
    let files = fetch(&ModelSource::Local(args.model.clone()), &morph_home()).map_err(load)?;
    let config = Checkpoint::config(&files)?;
    let first = match unit.stage {
        Some(stage) if stage.index > 0 => Rows::Hidden(vec![vec![0.0; 2 * config.hidden_size]]),
        _ => Rows::Tokens(vec![vec![config.pad_token_id, config.pad_token_id]]),
    };
    let (engine, times, prepared) = match &args.prepared {
        Some(dir) => {
            let shape = (config.hidden_size, config.pad_token_id);
            let (runtime, times) = OrtRuntime::load_prepared(&args.ort_library, dir, unit, plans, shape)?;
            (runtime, times, true)
        }
        None => {
            if let Some(dir) = &args.prepare {
                std::fs::create_dir_all(dir).map_err(|e| {
                    EngineError::Load(format!("prepared artefact folder {}: {e}", dir.display()))
                })?;
            }
            let library = Instant::now();
            environment(&args.ort_library)?;
            let library = library.elapsed();
            let read = Instant::now();
            let pooling = args.pooling.unwrap_or_else(|| Pooling::from_model_dir(&files.dir));
            let encoder = OrtEncoder::load(&files, pooling, &args.ort_library)?;
            let read = read.elapsed();
            let (runtime, mut times) = encoder.compile(unit, plans, args.prepare.as_deref())?;
            times.read = read;
            times.library = library;
            (runtime, times, false)
        }
    };
    Ok(Built { engine: Box::new(engine), prepared, times, first })
}
