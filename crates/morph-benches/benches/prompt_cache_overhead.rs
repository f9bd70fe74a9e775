//! What the host-memory prompt cache costs single-turn streams: the same llama.cpp decoder
//! without and with a prompt cache (1 GiB, Morph's default rule), side by side in one run on the
//! prompts, `--prompts` (16) first user turns of ShareGPT conversations, greedy, `--max-tokens`
//! (128) each, through a [`morph_decoder::DecoderThread`] at 1, 4 and 16 streams, each stream
//! count `--rounds` times (3), the two in turns. Every run has prompts of its own, so the cache
//! never holds a prompt's question from an earlier run: every closing sequence's state is copied
//! into it, and first turns share only the chat template's system message, which the kept
//! streams already give. Printed per stream count: output tokens/s, mean time to first
//! token and mean time per output token of each (the medians of the rounds), and the tokens/s
//! ratio with/without.
//!
//! `cargo bench -p morph-benches --bench prompt_cache_overhead [-- --prompts 16 --max-tokens 128
//! --rounds 3 --sharegpt ../shared/data/conversations/sharegpt.jsonl]`

use std::path::PathBuf;

use morph_backend::tuning::reexec_tuned;
use morph_benches::cli_arg;
use morph_decoder::{DecoderKernels, PromptCacheConfig, Reuse};
use streams::{default_decoder, first_turns, run};

#[path = "common/streams.rs"]
mod streams;

/// The cache's bound in the run with one.
const CACHE_BYTES: usize = 1 << 30;

fn main() {
    reexec_tuned();
    let prompts: usize = cli_arg("--prompts", 16);
    let max_tokens: u32 = cli_arg("--max-tokens", 128);
    let rounds: usize = cli_arg("--rounds", 3);
    let sharegpt: PathBuf =
        cli_arg("--sharegpt", morph_assets::shared_data().join("conversations/sharegpt.jsonl"));
    let without = default_decoder(DecoderKernels::LlamaCpp, PromptCacheConfig::OFF);
    let cache = PromptCacheConfig { bytes: CACHE_BYTES, reuse: Reuse::Turns };
    let with = default_decoder(DecoderKernels::LlamaCpp, cache);
    let stream_counts = [1usize, 4, 16];
    let all = first_turns(&without.model.tokenizer, &sharegpt, prompts * rounds * stream_counts.len());
    let mut sets = all.chunks(prompts);
    println!(
        "SmolLM2-135M-Instruct on llama.cpp, {prompts} ShareGPT first turns a run, greedy, max_tokens {max_tokens}, median of {rounds}"
    );
    println!(
        "{:>8} {:>15} {:>12} {:>13} {:>15} {:>12} {:>15} {:>12}",
        "streams",
        "no cache tok/s",
        "cache tok/s",
        "cache / none",
        "no cache TTFT",
        "cache TTFT",
        "no cache TPOT",
        "cache TPOT"
    );
    for streams in stream_counts {
        let (mut off, mut on) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let prompts = sets.next().expect("enough ShareGPT first turns");
            off.push(run(&without, prompts, streams, max_tokens));
            on.push(run(&with, prompts, streams, max_tokens));
        }
        let of = |runs: &[streams::Run], f: fn(&streams::Run) -> f64| median(runs.iter().map(f).collect());
        let (off_rate, on_rate) = (of(&off, streams::Run::tokens_per_s), of(&on, streams::Run::tokens_per_s));
        let (off_ttft, on_ttft) = (of(&off, |r| r.ttft_ms), of(&on, |r| r.ttft_ms));
        let (off_tpot, on_tpot) = (of(&off, |r| r.tpot_ms), of(&on, |r| r.tpot_ms));
        println!(
            "{streams:>8} {off_rate:>15.1} {on_rate:>12.1} {:>12.3}x {off_ttft:>12.0} ms {on_ttft:>9.0} ms \
             {off_tpot:>12.1} ms {on_tpot:>9.1} ms",
            on_rate / off_rate
        );
    }
    let stats = with.prompt_cache.as_ref().map(|c| c.stats()).unwrap_or_default();
    println!(
        "prompt cache after the runs: {} entries, {} MiB, {} hits",
        stats.entries,
        stats.bytes >> 20,
        stats.hits
    );
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
