//! SSJF served live on SmolLM2: the queue runs the shortest predicted generation first (FCFS
//! runs them by arrival), and the built-in predictor's lengths reach the scheduler; a repeated
//! prompt is answered from the length cache, which learnt its true length when it ended by itself
//! (not when its max_tokens cut it); the jobs are weighed by the decoder's costs the server
//! measured as it started.

use crate::common;

use std::time::Duration;

use common::{client, decoder, post, start};
use morph_backend::EngineKind;
use morph_backend::engines::OrtEngine;
use morph_core::Dtype;
use morph_fetch::ModelSource;
use morph_fetch::onnxruntime_library;
use morph_fetch::{Pip, fetch, morph_home};
use morph_server::prediction::PredictorConfig;
use serde_json::json;

fn chat(question: &str, max_tokens: u32) -> String {
    json!({"messages": [{"role": "user", "content": question}], "max_tokens": max_tokens, "temperature": 0})
        .to_string()
}

/// One slot; a long generation holds it while A (predicted 200 tokens) then B (predicted 3)
/// arrive. Returns which of A and B finished first.
async fn first_of_two(order: &str) -> &'static str {
    let mut config = decoder(order, json!({"batching": {"mode": "continuous", "max_batch": 1}}));
    let (a, b) = ("Tell me about rivers.", "Say yes.");
    config.predictor = PredictorConfig::Oracle(vec![(a.into(), 200), (b.into(), 3)]);
    let server = start(config).await;
    let url = server.url.clone();
    let holder = tokio::spawn({
        let url = url.clone();
        async move { post(&url, "/v1/chat/completions", &chat("Write a long story about a dragon.", 60)).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel();
    for (name, question) in [("A", a), ("B", b)] {
        let (url, done_tx) = (url.clone(), done_tx.clone());
        tokio::spawn(async move {
            let (status, body) = post(&url, "/v1/chat/completions", &chat(question, 8)).await;
            assert_eq!(status, 200, "{body}");
            let _ = done_tx.send(name);
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, body) = holder.await.expect("holder");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["usage"]["completion_tokens"], 60, "the holder must outlast both arrivals: {body}");
    let first = done_rx.recv().await.expect("a finish");
    assert!(done_rx.recv().await.is_some());
    server.stop().await;
    first
}

#[tokio::test]
async fn ssjf_runs_the_shortest_predicted_first_and_fcfs_the_earliest() {
    assert_eq!(first_of_two("ssjf").await, "B");
    assert_eq!(first_of_two("fcfs").await, "A");
}

#[tokio::test]
async fn the_builtin_predictor_feeds_the_scheduler_and_finished_lengths_are_cached() {
    let mut config = decoder("ssjf", json!({}));
    let library = onnxruntime_library(None, &morph_home(), &Pip::from_env()).expect("fetching ONNX Runtime");
    let encoder = fetch(&ModelSource::Default, &morph_home()).expect("fetching the encoder");
    config.predictor = PredictorConfig::Model {
        encoder,
        engine: EngineKind::new(OrtEngine { library, onnx: None, plans: Vec::new(), dtype: Dtype::Fp32 }),
        head: None,
    };
    let server = start(config).await;
    let metrics = || async {
        client().get(format!("{}/metrics", server.url)).send().await.unwrap().text().await.unwrap()
    };
    // An answer cut by its max_tokens is not learnt (it is only known to be at least that long):
    // the same prompt is predicted by the model again.
    for _ in 0..2 {
        let (status, body) = post(&server.url, "/v1/chat/completions", &chat("Say hi.", 4)).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["choices"][0]["finish_reason"], "length", "{body}");
    }
    let m = metrics().await;
    assert!(m.contains("morph_prediction_seconds_count 2\n"), "{m}");
    assert!(!m.contains("morph_prediction_cache_hits_total"), "{m}");
    // An answer that ends by itself is learnt: the next call of its prompt is answered from the cache.
    for _ in 0..2 {
        let (status, body) = post(&server.url, "/v1/chat/completions", &chat("Say hi.", 64)).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["choices"][0]["finish_reason"], "stop", "{body}");
    }
    let m = metrics().await;
    assert!(m.contains("morph_prediction_seconds_count 4\n"), "{m}");
    assert!(m.contains("morph_prediction_cache_hits_total 1\n"), "{m}");
    let info: serde_json::Value =
        client().get(format!("{}/info", server.url)).send().await.unwrap().json().await.unwrap();
    assert_eq!(info["predictor"]["kind"], "model", "{info}");
    assert_eq!(info["predictor"]["objective"], "regression-l1", "{info}");
    // The jobs are weighed and aged by the decode step and prefill measured as the server started.
    let (step, weight) = (&info["policy"]["aging"]["token_ms"], &info["policy"]["prefill_weight"]);
    let measured = |v: &serde_json::Value| v.as_f64().is_some_and(|x| x.is_finite() && x > 0.0);
    assert!(measured(step) && measured(weight), "{info}");
    server.stop().await;
}
