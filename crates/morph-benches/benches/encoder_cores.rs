//! How to spend two cores on the encoder: one ONNX Runtime session with 2 intra-op threads, or
//! two sessions with 1 thread each running batches side by side; and, on one thread, a
//! dynamic-shaped runtime against a fixed one of exactly the batch's shape. Prints padded
//! tokens/s of each over batch × length, and the ratios.
//!
//! `cargo bench -p morph-benches --bench encoder_cores [-- --seconds S --lens 16,32,... --batches 1,8,...]`

use std::time::{Duration, Instant};

use morph_benches::cli_arg;
use morph_core::{RuntimeSpec, TokenPlan, UnitSpec};
use morph_encoder::{OrtEncoder, OrtRuntime, Pooling};
use morph_engine::timing::synthetic_batch;
use morph_engine::{BatchInput, Engine};
use morph_fetch::ModelSource;
use morph_fetch::onnxruntime_library;
use morph_fetch::{Pip, fetch, morph_home};

/// Batches per second that `runtimes` complete together, each on its own thread, in `seconds`.
fn batches_per_second(runtimes: Vec<OrtRuntime>, inputs: &[Vec<u32>], seconds: f64) -> f64 {
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let start = Instant::now();
    let done: usize = std::thread::scope(|s| {
        let handles: Vec<_> = runtimes
            .into_iter()
            .map(|mut rt| {
                s.spawn(move || {
                    let mut n = 0;
                    while Instant::now() < deadline {
                        rt.run(BatchInput::Tokens(inputs), TokenPlan::Plain).expect("batch");
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("thread")).sum()
    });
    done as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let seconds: f64 = cli_arg("--seconds", 2.0);
    let lens: String = cli_arg("--lens", "16,32,64,128".to_string());
    let batches: String = cli_arg("--batches", "1,4,8,16,32".to_string());
    let parse = |s: &str| s.split(',').filter_map(|x| x.parse().ok()).collect::<Vec<u32>>();
    let home = morph_home();
    let files = fetch(&ModelSource::Default, &home).expect("fetching the default model");
    let library = onnxruntime_library(None, &home, &Pip::from_env()).expect("fetching ONNX Runtime");
    let ort = OrtEncoder::load(&files, Pooling::Mean, &library).expect("ONNX Runtime encoder");
    let instance = |spec, threads| {
        ort.instance(UnitSpec::batch(spec).with_threads(threads), &[TokenPlan::Plain]).expect("runtime")
    };
    println!("padded tokens/s, all-MiniLM-L6-v2 on ONNX Runtime, full batches, {seconds} s per cell");
    println!(
        "{:>6} {:>5} {:>12} {:>12} {:>8} {:>12} {:>12} {:>11}",
        "batch", "len", "1x2 dynamic", "2x1 dynamic", "2x1/1x2", "1x1 dynamic", "1x1 fixed", "fixed/dyn"
    );
    for &len in &parse(&lens) {
        for &batch in &parse(&batches) {
            let inputs = synthetic_batch(len, batch);
            let dynamic = RuntimeSpec::dynamic(512, batch);
            let tokens = f64::from(len * batch);
            let rate = |runtimes| batches_per_second(runtimes, &inputs, seconds) * tokens;
            let one = rate(vec![instance(dynamic, 2)]);
            let pair = rate(vec![instance(dynamic, 1), instance(dynamic, 1)]);
            let single = rate(vec![instance(dynamic, 1)]);
            let fixed = rate(vec![instance(RuntimeSpec::fixed(len, batch), 1)]);
            println!(
                "{batch:>6} {len:>5} {one:>12.0} {pair:>12.0} {:>7.2}x {single:>12.0} {fixed:>12.0} {:>10.2}x",
                pair / one,
                fixed / single
            );
        }
    }
}
