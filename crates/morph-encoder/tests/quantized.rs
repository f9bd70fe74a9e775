//! Int8 graphs (`--dtype int8`: ONNX Runtime's DynamicQuantizeMatMul, weights per output
//! column) against their fp32 twin on the real all-MiniLM-L6-v2 weights: within the stated
//! bound (mean cosine ≥ 0.99, every vector ≥ 0.98: on 400 SST-2 sentences `int8_graphs`
//! measured 0.9955 and 0.9806), and not the same computation (some vector moves).

use morph_core::RuntimeSpec;
use morph_core::fixtures::random_ids;
use morph_encoder::onnx::Dtype;
use morph_encoder::pooling::cosine;
use morph_encoder::{OrtEncoder, Pooling, TextTokenizer};
use morph_engine::Engine;
use morph_fetch::{ModelSource, Pip, fetch, morph_home, onnxruntime_library};

/// The bounds the int8 graphs are held to against fp32: the mean cosine, and every vector's.
const MEAN_BOUND: f32 = 0.99;
const LEAST_BOUND: f32 = 0.98;

#[test]
fn int8_vectors_stay_within_the_bounds_of_fp32() {
    let home = morph_home();
    let files = fetch(&ModelSource::Default, &home).expect("the default model");
    let library = onnxruntime_library(None, &home, &Pip::from_env()).expect("ONNX Runtime");
    let tokenizer = TextTokenizer::load(&files.tokenizer).expect("tokenizer");
    let sentences = [
        "This is an example sentence",
        "A man is eating food.",
        "The quick brown fox jumps over the lazy dog, again and again, all afternoon.",
        "Stocks rallied on Tuesday after the central bank held rates steady, citing cooling inflation.",
    ];
    let mut inputs: Vec<Vec<u32>> =
        sentences.iter().map(|s| tokenizer.encode(s).expect("tokenize")).collect();
    inputs.extend([random_ids(200, 1), random_ids(500, 2)]);
    let spec = RuntimeSpec::dynamic(512, 8);
    let run = |dtype: Dtype| {
        let encoder = OrtEncoder::load(&files, Pooling::Mean, &library).and_then(|e| e.with_dtype(dtype));
        encoder.expect("encoder").runtime(spec).expect("runtime").embed(&inputs).expect("embed")
    };
    let (fp32, int8) = (run(Dtype::Fp32), run(Dtype::Int8));
    let cosines: Vec<f32> = fp32.iter().zip(&int8).map(|(a, b)| cosine(a, b)).collect();
    for (i, c) in cosines.iter().enumerate() {
        assert!(*c >= LEAST_BOUND, "input {i}: cosine {c} to fp32");
    }
    let mean = cosines.iter().sum::<f32>() / cosines.len() as f32;
    assert!(mean >= MEAN_BOUND, "mean cosine {mean} to fp32: {cosines:?}");
    assert!(cosines.iter().any(|&c| c < 0.99999), "int8 changed nothing: {cosines:?}");
}
