//! `morph profile`: measure an engine (ONNX Runtime or candle) into a profile JSON.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use morph_core::{PaddedShape, RuntimeSpec, ShapeKind, TokenPlan, UnitSpec};
use morph_encoder::model_pooling;
use morph_train::profile::{MeasurePlan, measure_profile};

use crate::engine_args::EngineArgs;
use crate::model_args::ModelArgs;

#[derive(Debug, Args)]
pub(crate) struct ProfileArgs {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    engine: EngineArgs,
    /// Where to write the profile (schema: see morph_core::latency_profile).
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
    /// Measure one pipeline stage, K/N: stage K (from 0) of the encoder cut into N stages
    /// (--engine ort); a stage past the first is fed hidden states.
    #[arg(long)]
    stage: Option<String>,
    /// Measure this token plan (e.g. merge:2, exit:1; see --plans; --engine ort).
    #[arg(long, default_value_t = TokenPlan::Plain, allow_hyphen_values = true)]
    plan: TokenPlan,
    /// Measure dynamic-shaped runtimes fed full batches (what `dynamic:` runtimes serve)
    /// instead of fixed runtimes of each point's shape.
    #[arg(long)]
    dynamic: bool,
    /// Intra-op threads of the instance measured (default: every core).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    threads: Option<u16>,
    /// Instances running the same shape side by side, each on its own thread, while they are
    /// measured: what each costs in a layout of that many instances on this host.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    side_by_side: u16,
}

/// `K/N` as (K, N).
fn parse_stage(text: &str) -> anyhow::Result<(u16, u16)> {
    let (k, n) = text.split_once('/').context("--stage is K/N, e.g. 1/3")?;
    let (k, n): (u16, u16) = (k.trim().parse()?, n.trim().parse()?);
    anyhow::ensure!(k < n, "--stage {text}: K must be below N");
    Ok((k, n))
}

pub(crate) fn run(args: ProfileArgs) -> anyhow::Result<()> {
    let files = args.model.fetch()?;
    let mut engine = args.engine.clone();
    engine.plans.push(args.plan);
    let kind = engine.serving()?;
    let backend = kind.load(Some((&files, model_pooling(&files.dir)?)))?;
    let stage = args.stage.as_deref().map(parse_stage).transpose()?;
    // The unit measured at each shape: the whole model, or stage K of N.
    let unit = |spec: RuntimeSpec| -> anyhow::Result<UnitSpec> {
        Ok(match stage {
            Some((k, n)) => backend.stage_units(spec, n)?.swap_remove(usize::from(k)),
            None => UnitSpec::batch(spec),
        })
        .map(|u| u.with_threads_if(args.threads))
    };
    let plan = MeasurePlan {
        lens: args.lens,
        batches: args.batches,
        warmup: args.warmup,
        runs: args.runs,
        tokens: args.plan,
        hidden: stage.filter(|(k, _)| *k > 0).map(|_| backend.dim()),
        kind: if args.dynamic { ShapeKind::Dynamic } else { ShapeKind::Fixed },
        side_by_side: usize::from(args.side_by_side),
    };
    let bar = ProgressBar::new(plan.points() as u64);
    bar.set_style(ProgressStyle::with_template("{bar:40} {pos}/{len} points, {elapsed} {msg}")?);
    let mut profile = measure_profile(
        &files.name,
        &plan,
        &|spec| {
            let unit = unit(spec).map_err(|e| morph_engine::EngineError::Unsupported(e.to_string()))?;
            backend.engine(unit)
        },
        &mut |len, batch, ms| {
            bar.set_message(format!("b{batch} l{len}: {ms:.2} ms"));
            bar.inc(1);
        },
    )?;
    bar.finish();
    profile.engine = Some(format!("{}-cpu", kind.label()));
    profile.graph = kind.graph_fingerprint().map(str::to_string);
    profile.device = Some(morph_engine::host::host_device());
    profile.runs = Some(plan.runs);
    profile.stage = stage.map(|(k, _)| k);
    profile.plan = (args.plan != TokenPlan::Plain).then_some(args.plan);
    profile.threads = args.threads;
    profile.instances = Some(args.side_by_side);
    std::fs::write(&args.out, profile.to_json())?;
    println!(
        "{:>6} {}",
        "len",
        plan.batches.iter().map(|b| format!("{:>10}", format!("b{b} ms"))).collect::<String>()
    );
    for len in &plan.lens {
        let row: String = plan
            .batches
            .iter()
            .map(|b| format!("{:>10.2}", profile.latency_ms(PaddedShape { len: *len, batch: *b })))
            .collect();
        println!("{len:>6} {row}");
    }
    println!("wrote {}", args.out.display());
    Ok(())
}
