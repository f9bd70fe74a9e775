//! `morph profile`: measures an engine's median batch latency over a grid of shapes.

use std::time::Instant;

use morph_core::{PlanId, Point, Profile, RuntimeSpec, ShapeKind, TaskId};

use crate::{BatchInput, Engine, EngineError};

/// How to measure each grid point.
#[derive(Debug, Clone)]
pub struct MeasurePlan {
    pub lens: Vec<u32>,
    pub batches: Vec<u32>,
    /// Untimed runs before timing, to warm caches and allocators.
    pub warmup: u32,
    /// Timed runs; the median is kept.
    pub runs: u32,
    /// The token plan every batch runs under.
    pub tokens: PlanId,
    /// For a pipeline stage past the first: its hidden size (batches are hidden states).
    pub hidden: Option<usize>,
    /// Runtimes of exactly each point's shape (`Fixed`), or dynamic ones fed full batches.
    pub kind: ShapeKind,
    /// Instances running the same shape side by side, each on its own thread (what a layout
    /// of several instances on one host costs each of them); 1: one alone.
    pub side_by_side: usize,
}

impl MeasurePlan {
    pub fn points(&self) -> usize {
        self.lens.len() * self.batches.len()
    }
}

/// This host as profiles name it: the CPU's model name and the cores this process may use.
pub fn host_device() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or(std::env::consts::ARCH, |(_, name)| name.trim());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("{model}, {cores} cores")
}

/// The value after `--NAME` on the command line, parsed; `default` when absent or unparsable
/// (benchmarks take their few options this way).
pub fn cli_arg<T: std::str::FromStr>(name: &str, default: T) -> T {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Header of a side-by-side latency table: batch 1 and batch 8, `baseline` against `ours`.
pub fn side_by_side_header(baseline: &str, ours: &str) -> String {
    format!(
        "{:>5} {:>10} {:>10} {:>7} {:>10} {:>10} {:>7}",
        "len",
        format!("b1 {baseline}"),
        format!("b1 {ours}"),
        "ratio",
        format!("b8 {baseline}"),
        format!("b8 {ours}"),
        "ratio"
    )
}

/// One row of that table: (baseline ms, our ms) at batch 1 and 8, with baseline / ours.
pub fn side_by_side_row(len: u32, [(b1, o1), (b8, o8)]: [(f64, f64); 2]) -> String {
    format!("{len:>5} {b1:>10.2} {o1:>10.2} {:>6.2}x {b8:>10.2} {o8:>10.2} {:>6.2}x", b1 / o1, b8 / o8)
}

pub fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 { xs[n / 2] } else { (xs[n / 2 - 1] + xs[n / 2]) / 2.0 }
}

/// Full-length rows of deterministic, non-special token ids, `[CLS] ... [SEP]` shaped.
pub fn synthetic_batch(len: u32, rows: u32) -> Vec<Vec<u32>> {
    (0..rows)
        .map(|r| {
            (0..len)
                .map(|i| match i {
                    0 => 101,
                    _ if i + 1 == len => 102,
                    _ => 2000 + (i * 7 + r * 13) % 20_000,
                })
                .collect()
        })
        .collect()
}

/// Median latency of one batch under `plan` (`runs` timed after `warmup`), in ms.
pub fn time_batch(
    engine: &mut dyn Engine,
    input: BatchInput<'_>,
    plan: PlanId,
    warmup: u32,
    runs: u32,
) -> Result<f64, EngineError> {
    Ok(median(batch_times(engine, input, plan, warmup, runs)?))
}

/// The latency of each of `runs` batches under `plan` after `warmup` untimed ones, in ms.
fn batch_times(
    engine: &mut dyn Engine,
    input: BatchInput<'_>,
    plan: PlanId,
    warmup: u32,
    runs: u32,
) -> Result<Vec<f64>, EngineError> {
    for _ in 0..warmup {
        engine.run(input, plan)?;
    }
    (0..runs.max(1))
        .map(|_| {
            let start = Instant::now();
            engine.run(input, plan)?;
            Ok(start.elapsed().as_secs_f64() * 1e3)
        })
        .collect()
}

/// The median batch latency of `engines` each running `input` at the same time, in ms.
fn side_by_side(
    engines: &mut [Box<dyn Engine>],
    input: BatchInput<'_>,
    plan: &MeasurePlan,
) -> Result<f64, EngineError> {
    let timed = |engine: &mut Box<dyn Engine>| {
        batch_times(engine.as_mut(), input, plan.tokens, plan.warmup, plan.runs)
    };
    let times: Vec<Result<Vec<f64>, EngineError>> = std::thread::scope(|s| {
        let running: Vec<_> = engines.iter_mut().map(|e| s.spawn(move || timed(e))).collect();
        running.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    });
    let times = times.into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok(median(times.concat()))
}

/// Measures every `(len, batch)` of the plan on runtimes of that shape built by `make` (the
/// plan's `side_by_side` of them at once; the median over all their runs is kept), calling
/// `progress` after each point.
pub fn measure_profile(
    model: &str,
    plan: &MeasurePlan,
    make: &mut dyn FnMut(RuntimeSpec) -> Result<Box<dyn Engine>, EngineError>,
    progress: &mut dyn FnMut(u32, u32, f64),
) -> Result<Profile, EngineError> {
    let mut points = Vec::with_capacity(plan.points());
    for &batch in &plan.batches {
        for &len in &plan.lens {
            let spec = match plan.kind {
                ShapeKind::Fixed => RuntimeSpec::fixed(len, batch),
                ShapeKind::Dynamic => RuntimeSpec::dynamic(len, batch),
            };
            let mut engines =
                (0..plan.side_by_side.max(1)).map(|_| make(spec)).collect::<Result<Vec<_>, _>>()?;
            let tokens = synthetic_batch(len, batch);
            let hidden: Vec<Vec<f32>> = match plan.hidden {
                Some(dim) => (0..batch).map(|_| vec![0.1; len as usize * dim]).collect(),
                None => Vec::new(),
            };
            // Rows tagged with the first task: a prompt plan needs one, other plans ignore it.
            let tasks = vec![TaskId(0); tokens.len()];
            let input = if plan.hidden.is_some() {
                BatchInput::Hidden(&hidden)
            } else {
                BatchInput::Tasked(&tokens, &tasks)
            };
            let ms = side_by_side(&mut engines, input, plan)?;
            progress(len, batch, ms);
            points.push(Point { batch, len, ms });
        }
    }
    Profile::from_points(model, points).map_err(|e| EngineError::Inference(e.to_string()))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::EmulatedRuntime;
    use morph_core::PaddedShape;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    /// Measures emulated engines of `truth`: the runtimes built, the points reported, the profile.
    #[allow(clippy::type_complexity)]
    fn measure_emulated(
        truth: &Arc<Profile>,
        plan: &MeasurePlan,
    ) -> (Vec<RuntimeSpec>, Vec<(u32, u32, f64)>, Profile) {
        let (mut built, mut reported) = (Vec::new(), Vec::new());
        let measured = measure_profile(
            "m",
            plan,
            &mut |spec| {
                built.push(spec);
                Ok(Box::new(EmulatedRuntime::new(truth.clone(), morph_core::UnitSpec::encoder(spec), 4)))
            },
            &mut |len, batch, ms| reported.push((len, batch, ms)),
        )
        .unwrap();
        (built, reported, measured)
    }

    #[test]
    fn measuring_an_emulated_engine_puts_each_point_in_its_cell() {
        // Structure, not speed (a loaded host oversleeps): each grid point is built at its own
        // shape, in order, reported once, and filed in its own cell; an emulated batch never
        // takes less than its profile says.
        let truth = Arc::new(
            Profile::from_points(
                "m",
                [
                    Point { batch: 1, len: 8, ms: 1.0 },
                    Point { batch: 1, len: 16, ms: 2.0 },
                    Point { batch: 2, len: 8, ms: 3.0 },
                    Point { batch: 2, len: 16, ms: 6.0 },
                ],
            )
            .unwrap(),
        );
        let plan = MeasurePlan {
            lens: vec![8, 16],
            batches: vec![1, 2],
            warmup: 0,
            runs: 1,
            tokens: PlanId::PLAIN,
            hidden: None,
            kind: ShapeKind::Fixed,
            side_by_side: 1,
        };
        let (built, reported, measured) = measure_emulated(&truth, &plan);
        let grid = [(8, 1), (16, 1), (8, 2), (16, 2)];
        let shapes: Vec<RuntimeSpec> =
            grid.iter().map(|&(len, batch)| RuntimeSpec::fixed(len, batch)).collect();
        assert_eq!(built, shapes);
        assert_eq!(reported.iter().map(|&(l, b, _)| (l, b)).collect::<Vec<_>>(), grid);
        for (len, batch, ms) in reported {
            let shape = PaddedShape { len, batch };
            assert_eq!(measured.latency_ms(shape), ms, "({len},{batch}) filed in its own cell");
            let want = truth.latency_ms(shape);
            assert!(ms >= want, "({len},{batch}): {ms} ms, profiled {want}");
        }
    }

    #[test]
    fn side_by_side_builds_that_many_dynamic_instances_per_point() {
        let truth = Arc::new(Profile::from_points("m", [Point { batch: 1, len: 8, ms: 0.5 }]).unwrap());
        let plan = MeasurePlan {
            lens: vec![8, 16],
            batches: vec![2],
            warmup: 0,
            runs: 2,
            tokens: PlanId::PLAIN,
            hidden: None,
            kind: ShapeKind::Dynamic,
            side_by_side: 3,
        };
        let (built, _, measured) = measure_emulated(&truth, &plan);
        let want: Vec<RuntimeSpec> =
            [8, 8, 8, 16, 16, 16].iter().map(|&len| RuntimeSpec::dynamic(len, 2)).collect();
        assert_eq!(built, want);
        assert_eq!(measured.lengths(), vec![8, 16]);
    }
}
