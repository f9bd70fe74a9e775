//! OTAS's tasks served live: `morph serve --policy otas` on all-MiniLM-L6-v2 (ONNX Runtime, the
//! heads Morph ships, the plan profiles in `assets/profiles/otas`), called over HTTP.

use crate::common;

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

/// `morph serve` on ONNX Runtime compiling `plans`, scheduled by `policy` with `params`, priced by
/// the plan profiles in `assets/profiles/otas`.
fn serve_plans(plans: &str, policy: &str, params: &str) -> Served {
    let profiles = morph_assets::path("profiles/otas");
    let profiles = profiles.to_str().expect("a UTF-8 path");
    serve_with(&[
        "--engine",
        "ort",
        "--runtime",
        "dynamic:128x32",
        plans,
        "--policy",
        policy,
        "--policy-params",
        params,
        "--plan-profiles",
        profiles,
    ])
}

#[tokio::test]
async fn otas_classifies_under_its_plans_and_refuses_unknown_tasks_and_impossible_deadlines() {
    let served = serve_plans("--plans=exit:1,exit:3", "otas", r#"{"plans": ["exit:1", "exit:3"]}"#);
    let url = &served.url;

    let texts = ["a wonderful, moving and beautifully acted film", "a dull, lifeless and boring mess"];
    let (status, body) =
        classify(url, json!({ "task": "sst2", "input": texts, "slo_ms": 5000, "utility": 1 })).await;
    assert_eq!(status, 200, "{body}");
    let data = body["data"].as_array().expect("data");
    let labels: Vec<&str> = data.iter().map(|d| d["label"].as_str().expect("label")).collect();
    assert_eq!(labels, ["positive", "negative"], "{body}");
    for d in data {
        assert!(["exit:1", "exit:3"].contains(&d["plan"].as_str().expect("plan")), "{d}");
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
    assert!(
        body["error"]["message"].as_str().unwrap_or_default().contains("deadline (0.5 ms after arrival)"),
        "{body}"
    );

    let (status, body) = classify(url, json!({ "input": "no task" })).await;
    assert_eq!(status, 422, "{body}");

    // TEI's /predict shape: labels with scores, best first; a list of them per input of an array.
    let predict = |body: Value| async move {
        let response =
            reqwest::Client::new().post(format!("{url}/predict")).json(&body).send().await.expect("answer");
        (response.status().as_u16(), response.json::<Value>().await.expect("JSON body"))
    };
    let (status, body) =
        predict(json!({ "task": "sms_spam", "inputs": "WINNER!! Claim your free prize now, text 80082" }))
            .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body[0]["label"], "spam", "{body}");
    assert!(body[0]["score"].as_f64() > body[1]["score"].as_f64(), "{body}");
    let (status, body) = predict(json!({ "task": "sst2", "inputs": texts })).await;
    assert_eq!(
        (status, body[0][0]["label"].clone(), body[1][0]["label"].clone()),
        (200, json!("positive"), json!("negative")),
        "{body}"
    );

    let metrics = reqwest::get(format!("{url}/metrics")).await.expect("metrics").text().await.expect("text");
    assert!(metrics.contains("morph_policy_otas_batches_total"), "{metrics}");

    // A second of the shipped scenario's query types, replayed and scored by `morph bench`.
    let scenario = morph_assets::path("scenarios/otas_synthetic_cpu.toml");
    let data = morph_assets::shared_data().join("text");
    let bench = std::process::Command::new(env!("CARGO_BIN_EXE_morph"))
        .args(["bench", "--url", url, "--endpoint", "classify", "--scenario"])
        .arg(scenario)
        .arg("--data")
        .arg(data)
        .args(["--duration", "1", "--json"])
        .output()
        .expect("morph bench");
    assert!(bench.status.success(), "{}", String::from_utf8_lossy(&bench.stderr));
    let reports: Value = serde_json::from_slice(&bench.stdout).expect("bench JSON");
    let report = &reports[0];
    let sent = report["sent"].as_u64().expect("sent");
    assert!(sent > 10, "{report}");
    let c = &report["classify"];
    let types: f64 = c["types"].as_array().expect("types").iter().map(|t| t.as_f64().unwrap_or(0.0)).sum();
    assert!((types - 1.0).abs() < 1e-9, "{report}");
    let plans = c["plans"].as_object().expect("plans");
    assert!(plans.keys().all(|plan| ["exit:1", "exit:3"].contains(&plan.as_str())), "{report}");
    let answered: u64 = plans.values().map(|n| n.as_u64().unwrap_or(0)).sum();
    assert_eq!(answered, report["ok"].as_u64().expect("ok"), "{report}");
    assert!(c["utility"].as_f64() <= c["attainable"].as_f64(), "{report}");
}

/// A prompt plan served live: every batch runs plan 2 (two trained prompts per layer, the
/// paper's fixed-prompt baseline), calls of three tasks are sent at once, and each
/// row takes its own task's prompts and head.
#[tokio::test]
async fn fixed_prompts_serve_a_batch_mixing_tasks_with_each_tasks_prompts() {
    let served = serve_plans("--plans=prompt:2", "pets-like", r#"{"plans": ["prompt:2"]}"#);
    let url = &served.url;
    let call = |task: &str, text: &str| {
        classify(url, json!({ "task": task, "input": [text, text], "slo_ms": 30000 }))
    };
    let (sst2, ag, sms) = tokio::join!(
        call("sst2", "a wonderful, moving and beautifully acted film"),
        call("ag_news", "The central bank raised interest rates as stocks fell on Wall Street."),
        call("sms_spam", "WINNER!! Claim your free prize now, text 80082"),
    );
    for ((status, body), want) in [(sst2, "positive"), (ag, "business"), (sms, "spam")] {
        assert_eq!(status, 200, "{body}");
        for d in body["data"].as_array().expect("data") {
            assert_eq!((d["label"].as_str(), d["plan"].as_str()), (Some(want), Some("prompt:2")), "{body}");
        }
    }
}

/// Task heads a user trained (`morph train adapt --out DIR`) served in place of the built-in ones
/// (`morph serve --task-heads DIR`): the answers carry DIR's classes. Heads read off another
/// encoder are refused at start, naming both encoders, and so are prompt plans beside them.
#[tokio::test]
async fn heads_a_user_trained_are_served_in_place_of_the_builtin_ones() {
    let dir = tempfile::tempdir().expect("temp dir");
    let heads = dir.path().to_str().expect("a UTF-8 path");
    let data = morph_assets::shared_data().join("text");
    let trained = std::process::Command::new(env!("CARGO_BIN_EXE_morph"))
        .args(["train", "adapt", "--limit", "40", "--epochs", "3", "--out", heads, "--data"])
        .arg(data)
        .output()
        .expect("morph train adapt");
    assert!(trained.status.success(), "{}", String::from_utf8_lossy(&trained.stderr));
    // The user's own names for SST-2's classes: what the answers must carry.
    let meta_path = dir.path().join("tasks.json");
    let meta = std::fs::read_to_string(&meta_path).expect("tasks.json");
    std::fs::write(
        &meta_path,
        meta.replacen(r#""negative","#, r#""bad","#, 1).replacen(r#""positive""#, r#""good""#, 1),
    )
    .expect("tasks.json written");

    let served = serve(&["--task-heads", heads]);
    let (status, body) =
        classify(&served.url, json!({ "task": "sst2", "input": ["a fine film", "a dull film"] })).await;
    assert_eq!(status, 200, "{body}");
    for d in body["data"].as_array().expect("data") {
        let classes: Vec<&String> = d["scores"].as_object().expect("scores").keys().collect();
        assert_eq!(classes, ["bad", "good"], "{body}");
        assert!(["bad", "good"].contains(&d["label"].as_str().expect("label")), "{body}");
    }
    drop(served);

    let refused = |flags: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_morph"))
            .args([
                "serve",
                "--port",
                "0",
                "--engine",
                "ort",
                "--runtime",
                "dynamic:128x4",
                "--task-heads",
                heads,
            ])
            .args(flags)
            .output()
            .expect("morph serve");
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let stderr = refused(&["--plans", "prompt:2"]);
    assert!(stderr.contains("--plans prompt:2") && stderr.contains("--task-heads"), "{stderr}");
    let meta = std::fs::read_to_string(&meta_path).expect("tasks.json");
    std::fs::write(&meta_path, meta.replace("all-MiniLM-L6-v2", "all-mpnet-base-v2"))
        .expect("tasks.json written");
    let stderr = refused(&[]);
    assert!(stderr.contains("all-mpnet-base-v2") && stderr.contains("all-MiniLM-L6-v2"), "{stderr}");
}
