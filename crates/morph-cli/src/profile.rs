//! `morph profile`: measure an engine (ONNX Runtime or candle) into a profile JSON.

use std::path::PathBuf;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use morph_core::UnitSpec;
use morph_engine::Pooling;
use morph_engine::measure::{MeasurePlan, measure_profile};
use morph_server::Launcher;

use crate::engine_args::EngineArgs;
use crate::model_args::ModelArgs;

#[derive(Debug, Args)]
pub(crate) struct ProfileArgs {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    engine: EngineArgs,
    /// Where to write the profile (schema: see morph_core::profile).
    #[arg(long)]
    out: PathBuf,
    /// Sequence lengths to measure, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "8,16,32,64,128,256,512")]
    lens: Vec<u32>,
    /// Batch sizes to measure, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    batches: Vec<u32>,
    /// Untimed runs before each point.
    #[arg(long, default_value_t = 3)]
    warmup: u32,
    /// Timed runs per point; the median is kept.
    #[arg(long, default_value_t = 10)]
    runs: u32,
}

pub(crate) fn run(args: ProfileArgs) -> anyhow::Result<()> {
    let files = args.model.fetch()?;
    let kind = args.engine.real()?;
    let launcher = Launcher::new(&files, Pooling::from_model_dir(&files.dir), &kind)?;
    let plan = MeasurePlan { lens: args.lens, batches: args.batches, warmup: args.warmup, runs: args.runs };
    let bar = ProgressBar::new(plan.points() as u64);
    bar.set_style(ProgressStyle::with_template("{bar:40} {pos}/{len} points, {elapsed} {msg}")?);
    let mut profile = measure_profile(
        &files.name,
        &plan,
        &mut |spec| launcher.engine(UnitSpec::encoder(spec)),
        &mut |len, batch, ms| {
            bar.set_message(format!("b{batch} l{len}: {ms:.2} ms"));
            bar.inc(1);
        },
    )?;
    bar.finish();
    profile.engine = Some(format!("{}-cpu", kind.label()));
    profile.device = Some(format!("{} threads", std::thread::available_parallelism().map_or(1, |n| n.get())));
    profile.runs = Some(plan.runs);
    std::fs::write(&args.out, profile.to_json())?;
    println!(
        "{:>6} {}",
        "len",
        plan.batches.iter().map(|b| format!("{:>10}", format!("b{b} ms"))).collect::<String>()
    );
    for len in &plan.lens {
        let row: String =
            plan.batches.iter().map(|b| format!("{:>10.2}", profile.latency_ms(*len, *b))).collect();
        println!("{len:>6} {row}");
    }
    println!("wrote {}", args.out.display());
    Ok(())
}
