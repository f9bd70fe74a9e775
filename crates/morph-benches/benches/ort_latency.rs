//! ONNX Runtime on Morph's own graph against the candle encoder, in one run: median ms for
//! batch 1 and 8 over lengths 8…512 on fixed-shape runtimes, and the ratio candle / ONNX.
//! Both engines run in this process with Morph's process tuning; rounds alternate the two
//! shape by shape, so host noise hits both alike. Then token merging on the ONNX graph at
//! b8×128: time and cosine to the unmerged vectors for r tokens merged per layer.
//!
//! `cargo bench -p morph-benches --bench ort_latency [-- --runs N --rounds R --lens 8,16,...]`

use std::sync::Arc;

use morph_backend::tuning::reexec_tuned;
use morph_benches::{cli_arg, side_by_side_header, side_by_side_row};
use morph_core::{RuntimeSpec, TokenPlan, UnitSpec};
use morph_encoder::pooling::cosine;
use morph_encoder::{CandleRuntime, Encoder, OrtEncoder, Pooling};
use morph_engine::timing::{median, synthetic_batch, time_batch};
use morph_engine::{BatchInput, Engine};
use morph_fetch::ModelSource;
use morph_fetch::onnxruntime_library;
use morph_fetch::{Pip, fetch, morph_home};

fn main() {
    reexec_tuned();
    let runs: u32 = cli_arg("--runs", 10);
    let rounds: usize = cli_arg("--rounds", 3);
    let lens: String = cli_arg("--lens", "8,16,32,64,128,256,512".to_string());
    let lens: Vec<u32> = lens.split(',').filter_map(|l| l.parse().ok()).collect();
    let home = morph_home();
    let files = fetch(&ModelSource::Default, &home).expect("fetching the default model");
    let library = onnxruntime_library(None, &home, &Pip::from_env()).expect("fetching ONNX Runtime");
    let candle = Arc::new(Encoder::load(&files, Pooling::Mean).expect("candle weights"));
    let ort = OrtEncoder::load(&files, Pooling::Mean, &library).expect("ONNX Runtime encoder");

    println!(
        "encoder latency, all-MiniLM-L6-v2, fixed-shape runtimes: median over {rounds} interleaved rounds of the median of {runs} runs (ms)"
    );
    println!("{}", side_by_side_header("candle", "onnx"));
    for &len in &lens {
        let mut cells = Vec::new();
        for batch in [1u32, 8] {
            let spec = RuntimeSpec::fixed(len, batch);
            let inputs = synthetic_batch(len, batch);
            let mut theirs = CandleRuntime::new(candle.clone(), spec).expect("candle runtime");
            let mut ours = ort.runtime(spec).expect("ONNX runtime");
            let (mut c, mut o) = (Vec::new(), Vec::new());
            for _ in 0..rounds {
                let input = BatchInput::Tokens(&inputs);
                c.push(time_batch(&mut theirs, input, TokenPlan::Plain, 2, runs).expect("candle batch"));
                o.push(time_batch(&mut ours, input, TokenPlan::Plain, 2, runs).expect("ONNX batch"));
            }
            cells.push((median(c), median(o)));
        }
        println!("{}", side_by_side_row(len, [cells[0], cells[1]]));
    }

    let spec = RuntimeSpec::fixed(128, 8);
    let inputs: Vec<Vec<u32>> = (0..8u32).map(|i| synthetic_batch(64 + 8 * i, 1).remove(0)).collect();
    let mut full = ort.runtime(spec).expect("ONNX runtime");
    let reference = full.embed(&inputs).expect("ONNX batch");
    let base =
        time_batch(&mut full, BatchInput::Tokens(&inputs), TokenPlan::Plain, 2, runs).expect("ONNX batch");
    println!("\ntoken merging, fixed:128x8, 8 sequences of 64..120 tokens");
    println!("{:>14} {:>10} {:>10} {:>12}", "merged/layer", "ms", "speed-up", "min cosine");
    for merge in [0, 4, 8, 16] {
        let plan = if merge == 0 { TokenPlan::Plain } else { TokenPlan::Merge(merge) };
        let mut rt = ort.instance(UnitSpec::batch(spec), &[plan]).expect("merging runtime");
        let ms = time_batch(&mut rt, BatchInput::Tokens(&inputs), plan, 2, runs).expect("merging batch");
        let got = rt.run(BatchInput::Tokens(&inputs), plan).expect("merging batch");
        let worst = got.iter().zip(&reference).map(|(a, b)| cosine(a, b)).fold(1.0f32, f32::min);
        println!("{merge:>14} {ms:>10.2} {:>9.2}x {worst:>12.4}", base / ms);
    }
}
