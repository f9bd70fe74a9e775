//! The stage times a pipeline policy (QUART and its baselines) plans with, measured when the
//! server starts: each stage's engine, on 1 and on 2 threads, runs one request of `len` tokens
//! (stage 0 token ids, later stages hidden states), and the medians are fitted to QUART's
//! s(C) = a + b/C. Hops are left at 0 ms: one request's hand-off costs 0.04–0.23 ms on the
//! worker transport (`cargo bench -p morph-benches --bench wire_hop`), far below a stage.

use morph_core::{RuntimeSpec, StageTime, StageTimes, TokenPlan};
use morph_engine::timing::time_batch;
use morph_engine::{BatchInput, EngineError};

use crate::launcher::Launcher;

/// Thread counts each stage is timed at.
const THREADS: [u16; 2] = [1, 2];

/// Measures the `stages` stages of `runtime` the launcher would start, at `len` tokens.
pub fn measure(
    launcher: &Launcher,
    runtime: RuntimeSpec,
    stages: u16,
    len: u32,
) -> Result<StageTimes, EngineError> {
    let units = launcher.backend().stage_units(runtime, stages)?;
    let len = len.clamp(1, runtime.max_len) as usize;
    let tokens = vec![vec![101u32; len]];
    let hidden = vec![vec![0.0f32; len * launcher.backend().dim()]];
    let mut times = Vec::with_capacity(units.len());
    let mut layers = 0;
    for unit in &units {
        let stage = unit.stage.ok_or_else(|| EngineError::Load("a stage unit without a stage".into()))?;
        layers = stage.end_layer;
        let input = if stage.index == 0 { BatchInput::Tokens(&tokens) } else { BatchInput::Hidden(&hidden) };
        let mut points = Vec::with_capacity(THREADS.len());
        for threads in THREADS {
            let mut engine = launcher.backend().engine(unit.with_threads(threads))?;
            points.push((threads, time_batch(engine.as_mut(), input, TokenPlan::Plain, 2, 7)?));
        }
        let time =
            StageTime::fit(&points).ok_or_else(|| EngineError::Load(format!("stage times {points:?}")))?;
        tracing::info!(stage = stage.index, ?points, a_ms = time.a_ms, b_ms = time.b_ms, "stage profiled");
        times.push(time);
    }
    Ok(StageTimes { runtime, layers, stages: times, hop_ms: 0.0 })
}
