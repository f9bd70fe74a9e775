//! Engine latency on the real model, in one run: median ms for batch 1 and 8 over lengths
//! 8…512, Morph's engine (its GELU/softmax kernels and process tuning, see
//! `morph_engine::kernels` and `morph_engine::tuning`) against candle as shipped (its own ops,
//! default process settings; measured in a child process), then the padding-waste case:
//! 8 sequences of lengths 10…120 padded to 120, in length buckets, and unpadded.
//!
//! `cargo bench -p morph-engine --bench engine_latency [-- --runs N --lens 8,16,...]`

use std::process::Command;
use std::sync::Arc;

use morph_core::RuntimeSpec;
use morph_engine::fetch::{fetch, morph_home};
use morph_engine::measure::{synthetic_batch, time_batch};
use morph_engine::tuning::{OPT_OUT, reexec_tuned};
use morph_engine::bert::Kernels;
use morph_engine::{CandleRuntime, Encoder, ModelSource, Pooling};

/// Set on the child process that measures the untuned baseline.
const CHILD: &str = "MORPH_BENCH_BASELINE";

fn arg<T: std::str::FromStr>(name: &str, default: T) -> T {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Bench {
    encoder: Arc<Encoder>,
    runs: u32,
}

impl Bench {
    fn time(&self, spec: RuntimeSpec, inputs: &[Vec<u32>]) -> f64 {
        let mut rt = CandleRuntime::new(self.encoder.clone(), spec).expect("runtime");
        time_batch(&mut rt, inputs, 2, self.runs).expect("batch")
    }

    /// `(len, b1 ms, b8 ms)` per length.
    fn table(&self, lens: &[u32]) -> Vec<(u32, f64, f64)> {
        lens.iter()
            .map(|&len| {
                let b1 = self.time(RuntimeSpec::fixed(len, 1), &synthetic_batch(len, 1));
                let b8 = self.time(RuntimeSpec::fixed(len, 8), &synthetic_batch(len, 8));
                (len, b1, b8)
            })
            .collect()
    }
}

/// The same table measured by a child process running with candle's defaults.
fn baseline(lens: &str, runs: u32) -> Vec<(u32, f64, f64)> {
    let exe = std::env::current_exe().expect("current exe");
    let out = Command::new(exe)
        .args(["--lens", lens, "--runs", &runs.to_string()])
        .env(CHILD, "1")
        .env(OPT_OUT, "1")
        .env_remove("GLIBC_TUNABLES")
        .env_remove("RAYON_NUM_THREADS")
        .env_remove("MORPH_TUNED")
        .output()
        .expect("running the baseline");
    serde_json::from_slice(&out.stdout).expect("baseline table")
}

fn main() {
    let runs: u32 = arg("--runs", 10);
    let lens_arg: String = arg("--lens", "8,16,32,64,128,256,512".to_string());
    let lens: Vec<u32> = lens_arg.split(',').filter_map(|l| l.parse().ok()).collect();
    let child = std::env::var_os(CHILD).is_some();
    if !child {
        reexec_tuned();
    }
    let files = fetch(&ModelSource::Default, &morph_home()).expect("fetching the default model");
    let kernels = if child { Kernels::Candle } else { Kernels::Morph };
    let encoder = Arc::new(Encoder::load_with(&files, Pooling::Mean, kernels).expect("loading the model"));
    let bench = Bench { encoder, runs };
    if child {
        println!("{}", serde_json::to_string(&bench.table(&lens)).expect("json"));
        return;
    }

    let base = baseline(&lens_arg, runs);
    let tuned = bench.table(&lens);
    println!("engine latency, all-MiniLM-L6-v2, candle CPU, median of {runs} runs (ms)");
    println!("{:>5} {:>10} {:>10} {:>7} {:>10} {:>10} {:>7}", "len", "b1 candle", "b1 morph", "ratio", "b8 candle", "b8 morph", "ratio");
    for ((len, b1, b8), (_, c1, c8)) in tuned.iter().zip(&base) {
        println!("{len:>5} {c1:>10.2} {b1:>10.2} {:>6.2}x {c8:>10.2} {b8:>10.2} {:>6.2}x", c1 / b1, c8 / b8);
    }

    // Padding waste: lengths 10, 25, …, 100, 120 — one batch of 8.
    let seqs: Vec<Vec<u32>> = (0..8u32)
        .map(|i| synthetic_batch(if i == 7 { 120 } else { 10 + 15 * i }, 1).remove(0))
        .collect();
    let padded = bench.time(RuntimeSpec::fixed(120, 8), &seqs);
    let dynamic = bench.time(RuntimeSpec::dynamic(120, 8), &seqs);
    // Length buckets, each a fixed runtime padded to its bound (Arlo's runtimes).
    let mut bucketed = 0.0;
    let mut lower = 0;
    for bound in [32u32, 64, 128] {
        let group: Vec<Vec<u32>> =
            seqs.iter().filter(|s| (lower + 1..=bound).contains(&(s.len() as u32))).cloned().collect();
        if !group.is_empty() {
            bucketed += bench.time(RuntimeSpec::fixed(bound, group.len() as u32), &group);
        }
        lower = bound;
    }
    let unpadded: f64 = seqs.iter().map(|s| bench.time(RuntimeSpec::dynamic(120, 1), std::slice::from_ref(s))).sum();
    let real_tokens: usize = seqs.iter().map(Vec::len).sum();
    println!("\npadding waste: 8 sequences of lengths 10..120 ({real_tokens} real tokens of 960 padded)");
    println!("{:<46} {:>9} {:>10}", "strategy", "ms", "vs padded");
    for (name, ms) in [
        ("one batch padded to 120 (fixed 120x8)", padded),
        ("one batch padded to its longest (dynamic)", dynamic),
        ("length buckets <=32, <=64, <=128 (fixed)", bucketed),
        ("unpadded: each sequence alone", unpadded),
    ] {
        println!("{name:<46} {ms:>9.2} {:>9.2}x", ms / padded);
    }
}
