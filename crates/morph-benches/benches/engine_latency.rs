//! Engine latency on the real model, in one run: median ms for batch 1 and 8 over lengths
//! 8…512, Morph's engine (its GELU/softmax kernels and process tuning, see
//! `morph_engine::kernels` and `morph_backend::tuning`) against candle as shipped (its own ops,
//! default process settings; measured in a child process), then the padding-waste case:
//! 8 sequences of lengths 10…120 padded to 120, in length buckets, and unpadded.
//!
//! `cargo bench -p morph-benches --bench engine_latency [-- --runs N --rounds R --lens 8,16,...]`

use std::io::{BufRead, BufReader, Lines, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::Arc;

use morph_backend::tuning::{OPT_OUT, reexec_tuned};
use morph_benches::{cli_arg, side_by_side_header, side_by_side_row};
use morph_core::{RuntimeSpec, TokenPlan};
use morph_encoder::bert::Kernels;
use morph_encoder::{CandleRuntime, Encoder, Pooling};
use morph_engine::BatchInput;
use morph_engine::timing::{median, synthetic_batch, time_batch};
use morph_fetch::ModelSource;
use morph_fetch::{fetch, morph_home};

/// Set on the child process that measures the untuned baseline.
const CHILD: &str = "MORPH_BENCH_BASELINE";

struct Bench {
    encoder: Arc<Encoder>,
    runs: u32,
}

impl Bench {
    fn time(&self, spec: RuntimeSpec, inputs: &[Vec<u32>]) -> f64 {
        let mut rt = CandleRuntime::new(self.encoder.clone(), spec).expect("runtime");
        time_batch(&mut rt, BatchInput::Tokens(inputs), TokenPlan::Plain, 2, self.runs).expect("batch")
    }
}

/// candle as shipped, in a child process with default settings, timing one shape per request
/// line (`LEN BATCH`) so that the parent can interleave it with its own measurements.
struct Baseline {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Baseline {
    fn start(runs: u32) -> Self {
        let exe = std::env::current_exe().expect("current exe");
        let mut child = Command::new(exe)
            .args(["--runs", &runs.to_string()])
            .env(CHILD, "1")
            .env(OPT_OUT, "1")
            .env_remove("GLIBC_TUNABLES")
            .env_remove("RAYON_NUM_THREADS")
            .env_remove("MORPH_TUNED")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting the baseline");
        let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        Self { child, lines }
    }

    fn time(&mut self, len: u32, batch: u32) -> f64 {
        let stdin = self.child.stdin.as_mut().expect("stdin");
        writeln!(stdin, "{len} {batch}").expect("asking the baseline");
        let line = self.lines.next().expect("baseline answer").expect("baseline output");
        line.trim().parse().expect("baseline ms")
    }
}

/// Child side of [`Baseline`]: answers `LEN BATCH` lines with the median ms.
fn serve_baseline(bench: &Bench) {
    for line in std::io::stdin().lock().lines().map_while(Result::ok) {
        let mut it = line.split_whitespace().filter_map(|v| v.parse::<u32>().ok());
        let (Some(len), Some(batch)) = (it.next(), it.next()) else { continue };
        println!("{}", bench.time(RuntimeSpec::fixed(len, batch), &synthetic_batch(len, batch)));
    }
}

fn main() {
    let runs: u32 = cli_arg("--runs", 10);
    let lens: String = cli_arg("--lens", "8,16,32,64,128,256,512".to_string());
    let lens: Vec<u32> = lens.split(',').filter_map(|l| l.parse().ok()).collect();
    let child = std::env::var_os(CHILD).is_some();
    if !child {
        reexec_tuned();
    }
    let files = fetch(&ModelSource::Default, &morph_home()).expect("fetching the default model");
    let kernels = if child { Kernels::Candle } else { Kernels::Morph };
    let encoder = Arc::new(Encoder::load_with(&files, Pooling::Mean, kernels).expect("loading the model"));
    let bench = Bench { encoder, runs };
    if child {
        serve_baseline(&bench);
        return;
    }

    // Rounds alternate candle and Morph shape by shape, so host noise hits both alike.
    let rounds: usize = cli_arg("--rounds", 3);
    let mut baseline = Baseline::start(runs);
    println!(
        "engine latency, all-MiniLM-L6-v2, candle CPU: median over {rounds} interleaved rounds of the median of {runs} runs (ms)"
    );
    println!("{}", side_by_side_header("candle", "morph"));
    for &len in &lens {
        let mut cells = Vec::new();
        for batch in [1u32, 8] {
            let (mut theirs, mut ours) = (Vec::new(), Vec::new());
            for _ in 0..rounds {
                theirs.push(baseline.time(len, batch));
                ours.push(bench.time(RuntimeSpec::fixed(len, batch), &synthetic_batch(len, batch)));
            }
            cells.push((median(theirs), median(ours)));
        }
        println!("{}", side_by_side_row(len, [cells[0], cells[1]]));
    }
    drop(baseline.child.stdin.take());
    let _ = baseline.child.wait();

    // Padding waste: lengths 10, 25, …, 100, 120 — one batch of 8.
    let seqs: Vec<Vec<u32>> =
        (0..8u32).map(|i| synthetic_batch(if i == 7 { 120 } else { 10 + 15 * i }, 1).remove(0)).collect();
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
    let unpadded: f64 =
        seqs.iter().map(|s| bench.time(RuntimeSpec::dynamic(120, 1), std::slice::from_ref(s))).sum();
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
