//! What SSJF's length predictor costs the decoder beside it on one host's cores, as `morph serve
//! --task generate --predictor builtin` runs them: 4 streams decode ShareGPT first turns
//! (llama.cpp's kernels, greedy, `--max-tokens` each, as `decoder_speed` runs them) while a
//! thread predicts the output length of one prompt every `--every-ms` (MiniLM on ONNX Runtime,
//! 2 intra-op threads as served or 1, under the built-in head; at normal priority as served, or
//! at nice 19 to see whether priority keeps the decoder's cores for it). Prints decode
//! tokens/s against the decoder alone, the predictions' count and mean latency, and the
//! encoder's share of the run's wall time (its latency over the wall time; at nice 19 the
//! latency includes waiting for a free core): if sharing cost the decoder only that share, "vs
//! alone" would be about 1 − share.
//!
//! `cargo bench -p morph-benches --bench predictor_beside_decoder [-- --prompts 32 --max-tokens
//! 128 --every-ms 500 --sharegpt ../shared/data/conversations/sharegpt.jsonl]`

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use morph_benches::cli_arg;
use morph_core::{RuntimeSpec, TokenPlan, UnitSpec};
use morph_decoder::{DecoderKernels, PromptCacheConfig};
use morph_encoder::predictor::LengthPredictor;
use morph_encoder::predictor::model::PROMPT_TOKENS;
use morph_encoder::{OrtEncoder, TextTokenizer, model_pooling};
use morph_fetch::onnxruntime_library;
use morph_fetch::{ModelSource, Pip, fetch, morph_home};
use morph_train::predictor::dataset::load_sharegpt;
use streams::{Run, default_decoder, first_turns, run};

#[path = "common/streams.rs"]
mod streams;

/// Lowers the calling thread, and the threads it starts afterwards, to nice 19 (on Linux
/// PRIO_PROCESS with a thread's id sets that one thread's nice value).
fn yield_cores() -> std::io::Result<()> {
    rustix::process::setpriority_process(Some(rustix::thread::gettid()), 19).map_err(std::io::Error::from)
}

fn main() {
    let prompts: usize = cli_arg("--prompts", 32);
    let max_tokens: u32 = cli_arg("--max-tokens", 128);
    let every = Duration::from_millis(cli_arg("--every-ms", 500));
    let sharegpt: PathBuf =
        cli_arg("--sharegpt", morph_assets::shared_data().join("conversations/sharegpt.jsonl"));
    let home = morph_home();
    let decoder = default_decoder(DecoderKernels::LlamaCpp, PromptCacheConfig::OFF);
    let prompt_ids = first_turns(&decoder.model.tokenizer, &sharegpt, prompts);
    let conversations = load_sharegpt(&sharegpt).expect("ShareGPT");
    let texts: Vec<&str> =
        conversations.iter().filter_map(|c| c.round(1)).map(|(_, t)| t).take(prompts).collect();
    let files = fetch(&ModelSource::Default, &home).expect("fetching the default encoder");
    let library = onnxruntime_library(None, &home, &Pip::from_env()).expect("fetching ONNX Runtime");
    let encoder =
        OrtEncoder::load(&files, model_pooling(&files.dir).expect("pooling"), &library).expect("encoder");
    let predictor = |threads| {
        let unit = UnitSpec::batch(RuntimeSpec::dynamic(PROMPT_TOKENS as u32, 32)).with_threads(threads);
        let runtime = encoder.instance(unit, &[TokenPlan::Plain]).expect("an encoder instance");
        let tokenizer = TextTokenizer::load(&files.tokenizer).expect("tokenizer");
        LengthPredictor::new(tokenizer, Box::new(runtime), None).expect("the built-in head")
    };
    println!(
        "SmolLM2-135M-Instruct on llama.cpp, 4 streams, {} ShareGPT first turns, max_tokens {max_tokens}; \
         one prediction every {} ms",
        prompt_ids.len(),
        every.as_millis()
    );
    println!(
        "{:<22} {:>9} {:>9} {:>8} {:>9} {:>12} {:>11} {:>14}",
        "predictor's encoder",
        "tokens/s",
        "vs alone",
        "TTFT ms",
        "ms/token",
        "predictions",
        "predict ms",
        "encoder share"
    );
    let mut alone = None;
    // ONNX Runtime threads of the predictor's encoder (none: the decoder alone), and whether
    // it yields the cores.
    for (threads, yields) in
        [(None, false), (Some(2), false), (Some(1), false), (Some(2), true), (Some(1), true)]
    {
        let stop = AtomicBool::new(false);
        let (decoded, latencies): (Run, Vec<f64>) = std::thread::scope(|s| {
            let predicting = threads.map(|threads| {
                let (stop, texts, predictor) = (&stop, &texts, &predictor);
                s.spawn(move || {
                    if yields {
                        yield_cores().expect("nice 19");
                    }
                    // Made here, so that its ONNX Runtime threads inherit this thread's priority.
                    let mut predictor = predictor(threads);
                    let (mut latencies, mut next) = (Vec::new(), Instant::now());
                    for text in texts.iter().cycle() {
                        std::thread::sleep(next.saturating_duration_since(Instant::now()));
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        next += every;
                        let asked = Instant::now();
                        predictor.predict(&[text]).expect("a prediction");
                        latencies.push(asked.elapsed().as_secs_f64() * 1e3);
                    }
                    latencies
                })
            });
            let decoded = run(&decoder, &prompt_ids, 4, max_tokens);
            stop.store(true, Ordering::Relaxed);
            (decoded, predicting.map(|h| h.join().expect("the predictor")).unwrap_or_default())
        });
        let base = *alone.get_or_insert(decoded.tokens_per_s());
        let busy: f64 = latencies.iter().sum();
        let (predict_ms, share) = match latencies.len() {
            0 => ("-".to_string(), "-".to_string()),
            n => {
                (format!("{:.0}", busy / n as f64), format!("{:.1}%", busy / (decoded.seconds * 1e3) * 100.0))
            }
        };
        let label = match (threads, yields) {
            (None, _) => "none (decoder alone)".to_string(),
            (Some(t), false) => format!("{t} thread(s), sharing"),
            (Some(t), true) => format!("{t} thread(s), nice 19"),
        };
        println!(
            "{label:<22} {:>9.1} {:>8.2}x {:>8.0} {:>9.1} {:>12} {predict_ms:>11} {share:>14}",
            decoded.tokens_per_s(),
            decoded.tokens_per_s() / base,
            decoded.ttft_ms,
            decoded.tpot_ms,
            latencies.len(),
        );
    }
}
