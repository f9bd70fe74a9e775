//! The decoder's cost model, measured: SmolLM2-135M-Instruct through a [`Stepper`] (what a
//! decoder thread drives) on `--kernels` (llama-cpp, as served, or candle), median of `--runs`:
//! - prefill time by prompt length (one sequence): SSJF's C, `prefill_ms` in a scenario;
//! - decode-step time by batch size, each sequence at `--context` tokens: SSJF's K(b), `k_ms`;
//! - decode-step time of 4 sequences by the tokens each holds: how much a step's cost grows
//!   with its context (attention reads every cached token), which K(b) alone does not price;
//!   fitted as ms per cached token past `--context` (least squares through the step of 4 at
//!   `--context`): a scenario's `k_context` and `context_ms_per_token`.
//!
//! `cargo bench -p morph-benches --bench decoder_latency [-- --kernels llama-cpp|candle --runs N
//! --context T]`

use morph_decoder::costs;
use morph_decoder::{DecoderKernels, PrefillWeights, PromptCacheConfig, Stepper, StepperShape, load_decoder};

use morph_backend::tuning::reexec_tuned;
use morph_benches::cli_arg;
use morph_fetch::fetch_default_decoder;
use morph_fetch::{Pip, morph_home};

/// Longest context the table by context reaches, per sequence.
const LONGEST: usize = 1024;
/// Most tokens one sequence holds here (the mixed table's longest is 1,792).
const SEQ_TOKENS: usize = 2048;
/// A prompt is fed in pieces of at most this many tokens, as the served worker does.
const PIECE: usize = 256;

/// Median ms of a decode step of sequences holding `contexts` tokens.
fn step_ms(stepper: &mut dyn Stepper, contexts: &[usize], runs: usize) -> f64 {
    costs::step_ms(stepper, contexts, runs, PIECE).expect("decode step")
}

fn main() {
    reexec_tuned();
    let kernels: DecoderKernels = cli_arg("--kernels", DecoderKernels::LlamaCpp);
    let runs: usize = cli_arg("--runs", 5);
    let context: usize = cli_arg("--context", 128);
    let path = fetch_default_decoder(&morph_home(), &Pip::from_env()).expect("fetching SmolLM2");
    let loaded = load_decoder(&path, kernels, None, PromptCacheConfig::OFF, PrefillWeights::default())
        .expect("loading SmolLM2")
        .kernels;
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let shape = StepperShape::new(16, SEQ_TOKENS.max(context) + runs + 1, threads);
    let mut stepper = loaded.stepper(shape).expect("stepper");

    println!("SmolLM2-135M-Instruct, {}, {threads} threads, median of {runs} runs", kernels.label());
    println!("{:>14} {:>10}", "prefill len", "ms");
    for len in [32usize, 128, 512, 1024] {
        // A fresh prompt each run: a kept cache must not skip any of it.
        let prefill = costs::prefill_ms(stepper.as_mut(), len, runs, PIECE).expect("prefill");
        println!("{len:>14} {prefill:>10.1}");
    }
    println!(
        "\n{:>14} {:>10} {:>14}   (each sequence at {context} tokens)",
        "decode batch", "ms/step", "ms/token/seq"
    );
    let mut k4 = 0.0;
    for batch in [1usize, 2, 4, 8, 16] {
        let step = step_ms(stepper.as_mut(), &vec![context; batch], runs);
        if batch == 4 {
            k4 = step;
        }
        println!("{batch:>14} {step:>10.1} {:>14.1}", step / batch as f64);
    }
    println!("\n{:>14} {:>10} {:>14}   (a decode step of 4 sequences)", "tokens each", "ms/step", "vs at 64");
    let (mut first, mut sxy, mut sxx) = (None, 0.0, 0.0);
    for each in [64usize, 128, 256, 384, 512, 768, LONGEST] {
        let step = step_ms(stepper.as_mut(), &[each; 4], runs);
        let base = *first.get_or_insert(step);
        println!("{each:>14} {step:>10.1} {:>13.2}x", step / base);
        if each > context {
            // Tokens past `context` in all 4 caches, against the step's time past K(4).
            let x = 4.0 * (each - context) as f64;
            (sxy, sxx) = (sxy + x * (step - k4), sxx + x * x);
        }
    }
    if sxx > 0.0 {
        println!("\nfitted: k_context = {context}, context_ms_per_token = {:.5}", sxy / sxx);
    }
    println!("\n{:>22} {:>10}   (a decode step of 4, the same tokens in all)", "tokens each", "ms/step");
    for contexts in [[512, 512, 512, 512], [896, 384, 384, 384], [1280, 256, 256, 256], [1792, 128, 64, 64]] {
        let step = step_ms(stepper.as_mut(), &contexts, runs);
        println!("{:>22} {step:>10.1}", format!("{contexts:?}"));
    }
}
