//! Numerics of the candle encoder on the real all-MiniLM-L6-v2 weights, fetched by Morph.

use std::sync::Arc;

use morph_core::RuntimeSpec;
use morph_encoder::pooling::{cosine, l2_normalize};
use morph_encoder::{CandleRuntime, Encoder, TextTokenizer, model_pooling};
use morph_engine::Engine;
use morph_fetch::ModelSource;
use morph_fetch::{fetch, morph_home};

fn load() -> (Arc<Encoder>, TextTokenizer) {
    let files = fetch(&ModelSource::Default, &morph_home()).expect("fetching the default model");
    let encoder =
        Encoder::load(&files, model_pooling(&files.dir).expect("pooling")).expect("loading weights");
    let tokenizer = TextTokenizer::load(&files.tokenizer).expect("loading tokenizer");
    (Arc::new(encoder), tokenizer)
}

fn embed(runtime: &mut CandleRuntime, inputs: &[Vec<u32>]) -> Vec<Vec<f32>> {
    let mut out = runtime.embed(inputs).expect("embedding");
    out.iter_mut().for_each(|v| l2_normalize(v));
    out
}

#[test]
fn reference_sentences_match_sentence_transformers() {
    let (encoder, tok) = load();
    let mut rt = CandleRuntime::new(encoder, RuntimeSpec::dynamic(512, 8)).unwrap();
    let ids = tok.encode("This is an example sentence").unwrap();
    let v = &embed(&mut rt, &[ids])[0];
    assert_eq!(v.len(), 384);
    let want = [0.0677, 0.0635, 0.0487, 0.0793, 0.0374];
    for (got, want) in v.iter().zip(want) {
        assert!((got - want).abs() < 1e-3, "{:?} vs {want:?}", &v[..5]);
    }
    let a = tok.encode("A man is eating food.").unwrap();
    let b = tok.encode("A man is eating a piece of bread.").unwrap();
    let out = embed(&mut rt, &[a, b]);
    let cos = cosine(&out[0], &out[1]);
    assert!((cos - 0.755).abs() < 0.002, "cos = {cos}");
}

#[test]
fn padding_does_not_change_the_vector() {
    let (encoder, tok) = load();
    let target = tok.encode("The quick brown fox jumps over the lazy dog.").unwrap();
    let long = tok.encode(&"a much longer neighbour sentence ".repeat(12)).unwrap();
    let short = tok.encode("hi").unwrap();
    let mut dynamic = CandleRuntime::new(encoder.clone(), RuntimeSpec::dynamic(512, 8)).unwrap();
    let mut fixed = CandleRuntime::new(encoder, RuntimeSpec::fixed(128, 8)).unwrap();
    let alone = embed(&mut dynamic, std::slice::from_ref(&target))[0].clone();
    let in_batch = embed(&mut dynamic, &[short.clone(), target.clone(), long.clone()])[1].clone();
    let in_fixed = embed(&mut fixed, &[long, target.clone(), short])[1].clone();
    let fixed_alone = embed(&mut fixed, &[target])[0].clone();
    for (name, v) in
        [("in a padded batch", &in_batch), ("in a fixed runtime", &in_fixed), ("fixed alone", &fixed_alone)]
    {
        let c = cosine(&alone, v);
        assert!(c >= 0.9999, "{name}: cosine {c}");
    }
}

#[test]
fn runtime_rejects_batches_outside_its_shape() {
    let (encoder, _) = load();
    let mut fixed = CandleRuntime::new(encoder.clone(), RuntimeSpec::fixed(16, 2)).unwrap();
    assert!(fixed.embed(&[vec![101; 17]]).is_err());
    assert!(fixed.embed(&vec![vec![101, 102]; 3]).is_err());
    assert!(CandleRuntime::new(encoder.clone(), RuntimeSpec::fixed(513, 1)).is_err());
    // A dynamic fallback takes what the shape cannot, up to its own length.
    let mut fallback = CandleRuntime::new(encoder, RuntimeSpec::fixed(16, 2).with_fallback(32)).unwrap();
    assert_eq!(fallback.embed(&[vec![101; 30]]).unwrap().len(), 1);
    assert!(fallback.embed(&[vec![101; 33]]).is_err());
}
