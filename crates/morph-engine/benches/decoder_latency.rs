//! The decoder's cost model, measured: SmolLM2-135M-Instruct on the candle decoder, prefill
//! time by prompt length (one sequence) and decode-step time by batch size (each sequence at
//! `--context` tokens), median of `--runs`. The step times are SSJF's K(b), ms per output token
//! at batch size b, and a prefill is its C: `cluster.generation` in a scenario.
//!
//! `cargo bench -p morph-engine --bench decoder_latency [-- --runs N --context T]`

use morph_engine::decoder::{Llama, fetch_default_decoder};
use morph_engine::fetch::{Pip, morph_home};
use morph_engine::measure::{cli_arg, median};
use morph_engine::tuning::reexec_tuned;

fn ms(f: impl FnOnce()) -> f64 {
    let t = std::time::Instant::now();
    f();
    t.elapsed().as_secs_f64() * 1e3
}

fn main() {
    reexec_tuned();
    let runs: usize = cli_arg("--runs", 5);
    let context: usize = cli_arg("--context", 128);
    let path = fetch_default_decoder(&morph_home(), &Pip::from_env()).expect("fetching SmolLM2");
    let (llama, _) = Llama::load(&path).expect("loading SmolLM2");
    let prompt = |len: usize| (0..len).map(|i| 1000 + (i as u32 * 7919) % 40_000).collect::<Vec<u32>>();

    println!("SmolLM2-135M-Instruct, candle decoder (f32), median of {runs} runs");
    println!("{:>14} {:>10}", "prefill len", "ms");
    for len in [32usize, 128, 512, 1024] {
        let times: Vec<f64> = (0..runs)
            .map(|_| {
                let mut cache = llama.new_cache();
                let ids = prompt(len);
                ms(|| {
                    llama.step(&mut [(&ids, &mut cache)]).expect("prefill");
                })
            })
            .collect();
        println!("{len:>14} {:>10.1}", median(times));
    }
    println!("\n{:>14} {:>10} {:>14}", "decode batch", "ms/step", "ms/token/seq");
    for batch in [1usize, 2, 4, 8, 16] {
        let mut caches: Vec<_> = (0..batch)
            .map(|_| {
                let mut cache = llama.new_cache();
                llama.step(&mut [(&prompt(context), &mut cache)]).expect("prefill");
                cache
            })
            .collect();
        let times: Vec<f64> = (0..runs)
            .map(|_| {
                let mut step: Vec<(&[u32], &mut _)> = caches.iter_mut().map(|c| (&[504u32][..], c)).collect();
                ms(|| {
                    llama.step(&mut step).expect("decode step");
                })
            })
            .collect();
        let step = median(times);
        println!("{batch:>14} {step:>10.1} {:>14.1}", step / batch as f64);
    }
}
