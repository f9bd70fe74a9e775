//! OTAS's tasks served live: `morph serve --policy otas` on all-MiniLM-L6-v2 (ONNX Runtime, the
//! heads Morph ships, the plan profiles in `profiles/otas`), called over HTTP.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};

async fn classify(url: &str, body: Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{url}/v1/classify"))
        .json(&body)
        .timeout(Duration::from_secs(120))
        .send()
        .await
        .expect("an answer");
    (response.status().as_u16(), response.json().await.expect("JSON body"))
}

#[tokio::test]
async fn otas_classifies_under_its_plans_and_refuses_unknown_tasks_and_impossible_deadlines() {
    let profiles = concat!(env!("CARGO_MANIFEST_DIR"), "/../../profiles/otas");
    let served = serve_with(&[
        "--engine",
        "ort",
        "--runtime",
        "dynamic:128x32",
        "--plans=-101,-103",
        "--policy",
        "otas",
        "--policy-params",
        r#"{"plans": [-101, -103]}"#,
        "--plan-profiles",
        profiles,
    ]);
    let url = &served.url;

    let texts = ["a wonderful, moving and beautifully acted film", "a dull, lifeless and boring mess"];
    let (status, body) =
        classify(url, json!({ "task": "sst2", "input": texts, "slo_ms": 5000, "utility": 1 })).await;
    assert_eq!(status, 200, "{body}");
    let data = body["data"].as_array().expect("data");
    let labels: Vec<&str> = data.iter().map(|d| d["label"].as_str().expect("label")).collect();
    assert_eq!(labels, ["positive", "negative"], "{body}");
    for d in data {
        assert!([-101, -103].contains(&d["plan"].as_i64().expect("plan")), "{d}");
        let total: f64 =
            d["scores"].as_object().expect("scores").values().map(|s| s.as_f64().unwrap_or(0.0)).sum();
        assert!((total - 1.0).abs() < 1e-4, "{d}");
    }

    let (status, body) = classify(url, json!({ "task": "imdb", "input": "x" })).await;
    assert_eq!(status, 404, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("imdb") && message.contains("sst2, ag_news, sms_spam"), "{body}");

    let (status, body) = classify(url, json!({ "task": "ag_news", "input": "markets", "slo_ms": 0.5 })).await;
    assert_eq!(status, 504, "{body}");
    assert!(body["error"]["message"].as_str().unwrap_or_default().contains("deadline (0.5) ms"), "{body}");

    let (status, body) = classify(url, json!({ "input": "no task" })).await;
    assert_eq!(status, 422, "{body}");

    let metrics = reqwest::get(format!("{url}/metrics")).await.expect("metrics").text().await.expect("text");
    assert!(metrics.contains("morph_policy_otas_batches_total"), "{metrics}");
}
