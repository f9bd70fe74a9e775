//! Stage graphs and token plans through `morph serve`: all-MiniLM-L6-v2 cut into 3 stages on
//! ONNX Runtime (hidden states handed on by the live driver) answers the unsplit server's
//! vectors; a server compiling token plan −1 serves it when the policy asks for it.

use crate::common;

use common::{ort, post, start};
use morph_backend::EngineKind;
use morph_backend::engines::OrtEngine;
use morph_core::{RuntimeSpec, TokenPlan};
use morph_encoder::pooling::cosine;
use morph_server::Deployment;
use serde_json::json;

const TEXTS: [&str; 3] = [
    "A man is eating food.",
    "The quick brown fox jumps over the lazy dog, again and again, all afternoon.",
    "Stages hand hidden states on.",
];

async fn vectors(config: Deployment) -> (Vec<Vec<f32>>, String) {
    let server = start(config).await;
    let (status, body) = post(&server.url, "/v1/embeddings", &json!({"input": TEXTS}).to_string()).await;
    assert_eq!(status, 200, "{body}");
    let metrics = common::client().get(format!("{}/metrics", server.url)).send().await.expect("metrics");
    let metrics = metrics.text().await.expect("metrics body");
    server.stop().await;
    let data = body["data"].as_array().expect("data");
    let vectors = data
        .iter()
        .map(|d| {
            d["embedding"].as_array().expect("vector").iter().map(|x| x.as_f64().expect("f") as f32).collect()
        })
        .collect();
    (vectors, metrics)
}

fn one_runtime(config: Deployment) -> Deployment {
    Deployment { runtimes: vec![RuntimeSpec::dynamic(128, 4)], ..config }
}

#[tokio::test]
async fn three_stages_served_live_give_the_unsplit_vectors_and_a_plan_is_served_on_request() {
    let (whole, _) = vectors(one_runtime(ort())).await;
    let (split, metrics) = vectors(Deployment { stages: 3, ..one_runtime(ort()) }).await;
    for (a, b) in split.iter().zip(&whole) {
        assert!(cosine(a, b) >= 0.99999, "3 stages vs whole: cosine {}", cosine(a, b));
    }
    assert!(metrics.contains("morph_policy_stage_queue{stage=\"2\"} 0"), "{metrics}");
    assert!(metrics.contains("morph_instances{runtime=\"dynamic:128x4/stage2of3:L4-6\"} 1"), "{metrics}");

    let merged = |config: Deployment| {
        let ort = config.engine.settings::<OrtEngine>().expect("ort").clone();
        let engine = EngineKind::new(OrtEngine { plans: vec![TokenPlan::Merge(1)], ..ort });
        let params = json!({"plan": -1, "max_batch_tokens": 16384, "max_queue": 64});
        Deployment { engine, policy_params: params, ..config }
    };
    let (merged, _) = vectors(merged(one_runtime(ort()))).await;
    for (a, b) in merged.iter().zip(&whole) {
        let c = cosine(a, b);
        assert!((0.8..0.99999).contains(&c), "plan −1 merges tokens (6 of a short sentence): cosine {c}");
    }
}
