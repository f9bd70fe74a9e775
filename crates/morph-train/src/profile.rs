//! Latency profiles (`morph profile`, and `morph serve`'s first start on a new host): an
//! engine's median batch latency over a grid of shapes.

use morph_core::{LatencyProfile, Point, RuntimeSpec, ShapeKind, TaskId, TokenPlan};
use morph_engine::timing::{batch_times, median, synthetic_batch};
use morph_engine::{BatchInput, Engine, EngineError, at_once};

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
    pub tokens: TokenPlan,
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

/// Builds the runtime of a shape: called from several threads at once for instances side by side.
pub type MakeEngine<'a> = dyn Fn(RuntimeSpec) -> Result<Box<dyn Engine>, EngineError> + Sync + 'a;

/// The median batch latency of `engines` each running `input` at the same time, in ms.
fn side_by_side(
    engines: &mut [Box<dyn Engine>],
    input: BatchInput<'_>,
    plan: &MeasurePlan,
) -> Result<f64, EngineError> {
    let timed = |engine: &mut Box<dyn Engine>| {
        batch_times(engine.as_mut(), input, plan.tokens, plan.warmup, plan.runs)
    };
    let times =
        at_once(engines.iter_mut().map(|e| move || timed(e))).into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok(median(times.concat()))
}

/// Measures every `(len, batch)` of the plan's grid on runtimes of that shape built by `make`
/// (see [`measure_points`]) into a profile.
pub fn measure_profile(
    model: &str,
    plan: &MeasurePlan,
    make: &MakeEngine<'_>,
    progress: &mut dyn FnMut(u32, u32, f64),
) -> Result<LatencyProfile, EngineError> {
    let grid: Vec<(u32, u32)> =
        plan.batches.iter().flat_map(|&batch| plan.lens.iter().map(move |&len| (len, batch))).collect();
    let points = measure_points(plan, &grid, make, progress)?;
    LatencyProfile::from_points(model, points).map_err(|e| EngineError::Inference(e.to_string()))
}

/// Measures each `(len, batch)` of `shapes`, in order, on the plan's `side_by_side` runtimes
/// built by `make` (the median over all their runs is kept), calling `progress` after each.
/// Fixed runtimes are built for each shape; dynamic ones once, at the largest shape, and fed
/// every shape. The instances side by side are built at once, each on a thread of its own.
pub fn measure_points(
    plan: &MeasurePlan,
    shapes: &[(u32, u32)],
    make: &MakeEngine<'_>,
    progress: &mut dyn FnMut(u32, u32, f64),
) -> Result<Vec<Point>, EngineError> {
    let build = |spec| -> Result<Vec<Box<dyn Engine>>, EngineError> {
        at_once((0..plan.side_by_side.max(1)).map(|_| move || make(spec))).into_iter().collect()
    };
    let mut dynamic = match plan.kind {
        ShapeKind::Dynamic => {
            let longest = shapes.iter().map(|s| s.0).max().unwrap_or(1);
            let widest = shapes.iter().map(|s| s.1).max().unwrap_or(1);
            Some(build(RuntimeSpec::dynamic(longest, widest))?)
        }
        ShapeKind::Fixed => None,
    };
    let mut points = Vec::with_capacity(shapes.len());
    for &(len, batch) in shapes {
        let mut fixed;
        let engines = match dynamic.as_mut() {
            Some(engines) => engines,
            None => {
                fixed = build(RuntimeSpec::fixed(len, batch))?;
                &mut fixed
            }
        };
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
        let ms = side_by_side(engines, input, plan)?;
        progress(len, batch, ms);
        points.push(Point { batch, len, ms });
    }
    Ok(points)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use morph_core::PaddedShape;
    use morph_engine::EmulatedRuntime;

    /// Measures emulated engines of `truth`: the runtimes built, the points reported, the profile.
    #[allow(clippy::type_complexity)]
    fn measure_emulated(
        truth: &Arc<LatencyProfile>,
        plan: &MeasurePlan,
    ) -> (Vec<RuntimeSpec>, Vec<(u32, u32, f64)>, LatencyProfile) {
        let (built, mut reported) = (std::sync::Mutex::new(Vec::new()), Vec::new());
        let measured = measure_profile(
            "m",
            plan,
            &|spec| {
                built.lock().unwrap().push(spec);
                Ok(Box::new(EmulatedRuntime::new(truth.clone(), morph_core::UnitSpec::batch(spec), 4)))
            },
            &mut |len, batch, ms| reported.push((len, batch, ms)),
        )
        .unwrap();
        (built.into_inner().unwrap(), reported, measured)
    }

    #[test]
    fn measuring_an_emulated_engine_puts_each_point_in_its_cell() {
        // Structure, not speed (a loaded host oversleeps): each grid point is built at its own
        // shape, in order, reported once, and filed in its own cell; an emulated batch never
        // takes less than its profile says.
        let truth = Arc::new(
            LatencyProfile::from_points(
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
            tokens: TokenPlan::Plain,
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
    fn side_by_side_builds_that_many_dynamic_instances_once_at_the_largest_shape() {
        let truth =
            Arc::new(LatencyProfile::from_points("m", [Point { batch: 1, len: 8, ms: 0.5 }]).unwrap());
        let plan = MeasurePlan {
            lens: vec![8, 16],
            batches: vec![2],
            warmup: 0,
            runs: 2,
            tokens: TokenPlan::Plain,
            hidden: None,
            kind: ShapeKind::Dynamic,
            side_by_side: 3,
        };
        let (built, _, measured) = measure_emulated(&truth, &plan);
        let want = vec![RuntimeSpec::dynamic(16, 2); 3];
        assert_eq!(built, want);
        assert_eq!(measured.lengths(), vec![8, 16]);
    }
}
