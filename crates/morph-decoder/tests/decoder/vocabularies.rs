//! The decoder's tokenizer (llama.cpp's, on a GGUF's metadata) on other families than SmolLM2,
//! against an independent reference: llama.cpp's tokenizer test data, where each test string's
//! token ids were written by Hugging Face's own tokenizer of that model (fetched by Morph from
//! the `llama-cpp-python` source package into `MORPH_HOME`).

use std::path::{Path, PathBuf};

use morph_decoder::GgufTokenizer;
use morph_fetch::{Pip, fetch_llama_cpp_vocabularies, morph_home};

/// Families with other vocabulary types, pre-tokenizers and chat templates than SmolLM2's.
const FAMILIES: [&str; 5] = ["qwen2", "llama-bpe", "llama-spm", "phi-3", "command-r"];

fn vocabularies() -> PathBuf {
    fetch_llama_cpp_vocabularies(&morph_home(), &Pip::from_env()).expect("fetching llama.cpp's vocabularies")
}

/// The test strings and Hugging Face's ids for each (llama.cpp's `test-tokenizer-0` format).
fn cases(dir: &Path, family: &str) -> Vec<(String, Vec<u32>)> {
    let read =
        |ext: &str| std::fs::read_to_string(dir.join(format!("ggml-vocab-{family}.gguf.{ext}"))).expect(ext);
    let inputs = read("inp");
    let inputs: Vec<&str> = inputs.split("\n__ggml_vocab_test__\n").collect();
    let outputs = read("out");
    let ids: Vec<Vec<u32>> =
        outputs.lines().map(|l| l.split_whitespace().map(|t| t.parse().expect("an id")).collect()).collect();
    assert!(
        inputs.len() >= ids.len() && ids.len() > 30,
        "{family}: {} strings, {} id lists",
        inputs.len(),
        ids.len()
    );
    inputs.into_iter().map(String::from).zip(ids).collect()
}

#[test]
fn every_family_tokenizes_as_hugging_face_does() {
    let dir = vocabularies();
    for family in FAMILIES {
        let tokenizer = GgufTokenizer::load(&dir.join(format!("ggml-vocab-{family}.gguf"))).expect(family);
        let mut checked = 0;
        for (text, expected) in cases(&dir, family) {
            let ids = tokenizer.encode(&text).unwrap_or_else(|e| panic!("{family}: {text:?}: {e}"));
            // The reference ids are without the beginning-of-sequence token a model may add.
            let ids = match tokenizer.bos() {
                Some(bos) => ids.strip_prefix(&[bos]).expect("led by the BOS").to_vec(),
                None => ids,
            };
            assert_eq!(ids, expected, "{family}: {text:?}");
            checked += 1;
        }
        assert!(checked > 30, "{family}: {checked}");
    }
}

/// Control tokens written in a prompt become their ids, and generation ends at every token the
/// vocabulary marks as an end (Qwen's `<|im_end|>` and `<|endoftext|>` both).
#[test]
fn control_tokens_and_ends_of_generation_come_from_the_vocabulary() {
    let tokenizer = GgufTokenizer::load(&vocabularies().join("ggml-vocab-qwen2.gguf")).expect("qwen2");
    let ids = tokenizer.encode("<|im_start|>user\nHi<|im_end|>").expect("encode");
    let (start, end) = (ids[0], *ids.last().expect("ids"));
    assert_eq!(tokenizer.turn_start, Some(start), "{ids:?}");
    assert!(tokenizer.is_end(end) && tokenizer.is_end(tokenizer.eos()) && end != tokenizer.eos(), "{ids:?}");
    assert!(!tokenizer.is_end(start));
    assert_eq!(tokenizer.decode(&ids).expect("decode"), "user\nHi", "control tokens are left out of text");
    // Unicode the fuzzer found tricky: combining marks, emoji with joiners, a lone surrogate's
    // replacement, and text in several scripts.
    for text in ["e\u{301}", "👩‍👩‍👧", "\u{FFFD}", "нещо 中文 عربى"] {
        let ids = tokenizer.encode(text).expect(text);
        assert_eq!(tokenizer.decode(&ids).expect("decode"), text);
    }
}
