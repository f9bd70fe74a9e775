//! Morph's decoder paths side by side: llama.cpp's kernels on the GGUF weights as shipped (the
//! default) against the previous candle path (f32), on the same prompts in one run: the first
//! user turns of `--prompts` ShareGPT conversations (16 by default), greedy, `--max-tokens`
//! (128) each, run through a [`DecoderThread`] (Morph's own iteration loop) with 1, 4 and 16
//! streams at once (a new prompt joins as one finishes). Printed per path and stream count:
//! aggregate output tokens/s, mean time to first token, mean time per output token; then the
//! ratio llama.cpp / candle, and each path's tokens/s against its own at 1 stream (what batching
//! gains). `experiments/decoder_vs_llama_server.py` puts the served path beside llama.cpp's own
//! `llama-server`.
//!
//! `cargo bench -p morph-benches --bench decoder_speed [-- --prompts 16 --max-tokens 128
//! --sharegpt ../shared/data/conversations/sharegpt.jsonl --candle-streams 4]`

use std::collections::HashMap;
use std::path::PathBuf;

use morph_decoder::{DecoderKernels, PromptCacheConfig};

use morph_backend::tuning::reexec_tuned;
use morph_benches::cli_arg;
use streams::{default_decoder, first_turns, run};

#[path = "common/streams.rs"]
mod streams;

fn main() {
    reexec_tuned();
    let prompts: usize = cli_arg("--prompts", 16);
    let max_tokens: u32 = cli_arg("--max-tokens", 128);
    // candle at 16 streams takes minutes; it is run up to this many streams.
    let candle_streams: usize = cli_arg("--candle-streams", 16);
    let sharegpt: PathBuf =
        cli_arg("--sharegpt", morph_assets::shared_data().join("conversations/sharegpt.jsonl"));
    let fast = default_decoder(DecoderKernels::LlamaCpp, PromptCacheConfig::OFF);
    let reference = default_decoder(DecoderKernels::Candle, PromptCacheConfig::OFF);
    let prompts = first_turns(&fast.model.tokenizer, &sharegpt, prompts);
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
            let alone = *single.entry(label).or_insert(r.tokens_per_s());
            let ratio = match (&base, label) {
                (Some(b), "llama.cpp") => format!("{:.2}x", r.tokens_per_s() / b.tokens_per_s()),
                _ => String::new(),
            };
            println!(
                "{streams:>8} {label:>18} {:>10.1} {:>9.0} {:>12.1} {:>11.2}x {ratio:>16}",
                r.tokens_per_s(),
                r.ttft_ms,
                r.tpot_ms,
                r.tokens_per_s() / alone
            );
        }
    }
}
