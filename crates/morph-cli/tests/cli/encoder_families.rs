//! RoBERTa (XLM-R's configuration) and DistilBERT, read into BERT's layout, against
//! candle-transformers' own implementations of those architectures, on tiny random checkpoints
//! of their real configurations (Hugging Face's tensor names, DistilBERT's with the `distilbert.`
//! prefix a task model saves): Morph's ONNX graph on ONNX Runtime and its candle encoder, pooled
//! by mean (and for DistilBERT by the first and the last token too), at cosine ≥ 0.9999 to the
//! reference for every row of a padded batch; and each served over HTTP (by the default policy,
//! by Arlo, in two pipeline stages) at the same bound.

use std::path::Path;

use candle_core::Tensor;
use candle_transformers::models::{distilbert, xlm_roberta};
use morph_core::RuntimeSpec;
use morph_core::fixtures::random_ids;
use morph_encoder::pooling::cosine;
use morph_encoder::{CandleRuntime, Encoder, OrtEncoder, Pooling, TextTokenizer};
use morph_engine::Engine;
use morph_fetch::{ModelFiles, Pip, morph_home, onnxruntime_library};
use serde_json::json;

use crate::common;

use common::tiny::{
    BERT_LAYER, DISTILBERT_LAYER, HIDDEN, INNER, LAYERS, VOCAB, embeddings, layer_tensors, padded, weights,
    write_model,
};
use common::{embed, quick_profile, serve_with, vectors};

/// A family's reference: pooled vectors of token ids (one sequence per row) by a pooling.
type Reference = Box<dyn Fn(&[Vec<u32>], Pooling) -> Vec<Vec<f32>>>;

/// A padded batch: rows of 40, 17 and 5 random ids (none of them a special token).
fn batch() -> Vec<Vec<u32>> {
    [40, 17, 5].iter().enumerate().map(|(i, &n)| random_ids(n, i as u64 + 3)).collect()
}

/// `hidden` `[batch, len, h]` pooled over each row's real tokens by `pooling`.
fn pooled(hidden: &Tensor, mask: &Tensor, pooling: Pooling) -> Vec<Vec<f32>> {
    let rows: Vec<Vec<Vec<f32>>> = hidden.to_vec3().expect("hidden states");
    let mask: Vec<Vec<u32>> = mask.to_vec2().expect("mask");
    let pool = |row: &Vec<Vec<f32>>, real: usize| match pooling {
        Pooling::Cls => row[0].clone(),
        Pooling::Last => row[real - 1].clone(),
        Pooling::Mean => {
            (0..row[0].len()).map(|j| row[..real].iter().map(|t| t[j]).sum::<f32>() / real as f32).collect()
        }
    };
    rows.iter().zip(&mask).map(|(row, m)| pool(row, m.iter().filter(|&&x| x == 1).count())).collect()
}

/// Morph's ONNX Runtime and candle encoders on `files` against `reference`, row by row.
fn assert_morph_matches(
    files: &ModelFiles,
    ids: &[Vec<u32>],
    pooling: Pooling,
    reference: &[Vec<f32>],
    what: &str,
) {
    let library = onnxruntime_library(None, &morph_home(), &Pip::from_env()).expect("ONNX Runtime");
    let spec = RuntimeSpec::dynamic(64, 4);
    let ort = OrtEncoder::load(files, pooling, &library).expect("ONNX Runtime encoder");
    let ort = ort.runtime(spec).expect("runtime").embed(ids).expect("ort");
    let candle = std::sync::Arc::new(Encoder::load(files, pooling).expect("candle encoder"));
    let candle = CandleRuntime::new(candle, spec).expect("runtime").embed(ids).expect("candle");
    for (engine, rows) in [("ONNX Runtime", &ort), ("candle", &candle)] {
        for (i, (got, want)) in rows.iter().zip(reference).enumerate() {
            let c = cosine(got, want);
            assert!(c >= 0.9999, "{what} ({pooling} pooling) on {engine}, row {i}: cosine {c}");
        }
    }
}

/// A tiny XLM-R checkpoint in `dir`, and candle-transformers' hidden states for `ids`.
fn xlm_roberta(dir: &Path) -> (ModelFiles, Reference) {
    let config = json!({
        "model_type": "xlm-roberta", "architectures": ["XLMRobertaModel"],
        "vocab_size": VOCAB, "hidden_size": HIDDEN, "num_hidden_layers": LAYERS, "num_attention_heads": 4,
        "intermediate_size": INNER, "hidden_act": "gelu", "max_position_embeddings": 514,
        "type_vocab_size": 1, "pad_token_id": 1, "layer_norm_eps": 1e-5,
        "position_embedding_type": "absolute", "attention_probs_dropout_prob": 0.1, "hidden_dropout_prob": 0.1,
    });
    let mut tensors = embeddings("", 514, 1);
    for i in 0..LAYERS {
        tensors.extend(layer_tensors(&format!("encoder.layer.{i}"), BERT_LAYER));
    }
    let files = write_model(dir, &config, &tensors);
    let cfg: xlm_roberta::Config = serde_json::from_value(config).expect("candle-transformers' config");
    let model = xlm_roberta::XLMRobertaModel::new(&cfg, weights(&files)).expect("candle-transformers' XLM-R");
    let reference = Box::new(move |ids: &[Vec<u32>], pooling| {
        let (input, mask) = padded(ids, cfg.pad_token_id);
        let types = input.zeros_like().expect("a tensor op");
        let hidden = model.forward(&input, &mask, &types, None, None, None).expect("forward");
        pooled(&hidden, &mask, pooling)
    });
    (files, reference)
}

/// A tiny DistilBERT checkpoint in `dir` (tensors under `distilbert.`), and candle-transformers'
/// hidden states for `ids`.
fn distilbert(dir: &Path) -> (ModelFiles, Reference) {
    let config = json!({
        "model_type": "distilbert", "architectures": ["DistilBertModel"],
        "vocab_size": VOCAB, "dim": HIDDEN, "n_layers": LAYERS, "n_heads": 4, "hidden_dim": INNER,
        "activation": "gelu", "max_position_embeddings": 512, "initializer_range": 0.02, "pad_token_id": 0,
    });
    let mut tensors = embeddings("distilbert.", 512, 0);
    for i in 0..LAYERS {
        tensors.extend(layer_tensors(&format!("distilbert.transformer.layer.{i}"), DISTILBERT_LAYER));
    }
    let files = write_model(dir, &config, &tensors);
    let cfg: distilbert::Config = serde_json::from_value(config).expect("candle-transformers' config");
    let model =
        distilbert::DistilBertModel::load(weights(&files), &cfg).expect("candle-transformers' DistilBERT");
    let reference = Box::new(move |ids: &[Vec<u32>], pooling| {
        let (input, mask) = padded(ids, cfg.pad_token_id as u32);
        // candle-transformers' DistilBERT masks the keys where its mask is 1.
        let padding = mask.eq(0u32).and_then(|m| m.unsqueeze(1)?.unsqueeze(1)).expect("a tensor op");
        let hidden = model.forward(&input, &padding).expect("forward");
        pooled(&hidden, &mask, pooling)
    });
    (files, reference)
}

#[test]
fn xlm_roberta_matches_candle_transformers_on_both_engines() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (files, reference) = xlm_roberta(dir.path());
    let ids = batch();
    assert_morph_matches(&files, &ids, Pooling::Mean, &reference(&ids, Pooling::Mean), "XLM-R");
}

#[test]
fn distilbert_matches_candle_transformers_on_both_engines_by_every_pooling() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (files, reference) = distilbert(dir.path());
    let ids = batch();
    for pooling in [Pooling::Mean, Pooling::Cls, Pooling::Last] {
        assert_morph_matches(&files, &ids, pooling, &reference(&ids, pooling), "DistilBERT");
    }
}

/// Texts served over HTTP.
const FAMILY_TEXTS: [&str; 3] =
    ["A man is eating food.", "Positions count from the padding id plus one.", "short"];

/// Each family served over HTTP with the default policy, with Arlo (planning with a profile
/// `morph profile` measured of it) and cut into two pipeline stages: the vectors are the
/// reference's for the texts' token ids.
#[tokio::test(flavor = "multi_thread")]
async fn each_family_is_served_over_http_by_default_by_arlo_and_in_stages() {
    let scratch = tempfile::tempdir().expect("temp dir");
    for (name, family) in
        [("xlm-r", xlm_roberta as fn(&Path) -> (ModelFiles, Reference)), ("distilbert", distilbert)]
    {
        let dir = scratch.path().join(name);
        std::fs::create_dir(&dir).expect("model dir");
        let (files, reference) = family(&dir);
        let tokenizer = TextTokenizer::load(&files.tokenizer).expect("tokenizer");
        let ids: Vec<Vec<u32>> =
            FAMILY_TEXTS.iter().map(|t| tokenizer.encode(t).expect("tokenize")).collect();
        let want = reference(&ids, Pooling::Mean);
        let model = files.dir.to_str().expect("utf-8 path");

        let profile = scratch.path().join(format!("{name}.json"));
        quick_profile(model, "16,32", &profile);
        let profile = profile.to_str().expect("utf-8 path");
        let policies: [&[&str]; 3] = [
            &["--runtime", "dynamic:64x4"],
            &["--policy", "arlo", "--slo-ms", "2000", "--profile", profile],
            // Two pipeline stages of one layer each, hidden states handed between them.
            &["--runtime", "dynamic:64x4", "--stages", "2"],
        ];
        for policy in policies {
            let fp32 = ["--model", model, "--engine", "ort", "--dtype", "fp32"];
            let served = serve_with(&[&fp32[..], policy].concat());
            let (status, body) = embed(&served.url, &FAMILY_TEXTS).await;
            assert_eq!(status, 200, "{name} {policy:?}: {body}");
            let got = vectors(&body);
            assert_eq!((got.len(), got[0].len()), (FAMILY_TEXTS.len(), HIDDEN), "{name} {policy:?}");
            for (i, (got, want)) in got.iter().zip(&want).enumerate() {
                let c = cosine(got, want);
                assert!(c >= 0.9999, "{name} served with {policy:?}, text {i}: cosine {c}");
            }
        }
    }
}
