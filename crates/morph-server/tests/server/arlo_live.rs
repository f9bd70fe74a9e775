//! Arlo live: the same policy object as in simulation, driving emulated instances over HTTP.
//! Morph's robust form starts as DT, takes its runtime bounds from the observed lengths,
//! re-allocates and replaces instances (launching new workers) while serving, binds requests
//! late, and shows all of it in /info and /metrics.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{client, emulated, post, start};
use morph_backend::EngineKind;
use morph_backend::engines::EmulatedEngine;
use morph_core::{LatencyProfile, Point, RuntimeSpec, time::ms_to_nanos};
use morph_policy::registry::Context;
use serde_json::json;

async fn info(url: &str) -> serde_json::Value {
    client().get(format!("{url}/info")).send().await.expect("GET /info").json().await.expect("JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arlo_reallocates_and_replaces_instances_while_serving() {
    let mut config = emulated(2.0, RuntimeSpec::fixed(512, 1), 64);
    // Latency grows with length (1 ms at 1 token, 8 ms at 512), so short runtimes are worth it.
    let profile = Arc::new(
        LatencyProfile::from_points(
            "slope",
            [Point { batch: 1, len: 1, ms: 1.0 }, Point { batch: 1, len: 512, ms: 8.0 }],
        )
        .unwrap(),
    );
    config.engine = EngineKind::new(EmulatedEngine { profile: profile.clone(), dim: 8 });
    config.policy = "arlo".into();
    // Emulated instances have no dynamic-shape penalty, so fixed shapes would not pay here and
    // the robust form would keep DT's layout: this test is of the reallocation's mechanics.
    config.policy_params =
        json!({"first_allocation_s": 0.3, "period_s": 0.5, "tick_s": 0.05, "require_fixed_gain": false});
    config.policy_context =
        Context { profile: Some(profile), slo: Some(ms_to_nanos(40.0)), ..Context::default() };
    config.instances = 4;
    let server = start(config).await;

    // Four slots, all on the longest runtime, dynamic-shaped (DT until lengths are seen).
    let before = info(&server.url).await;
    assert_eq!(before["max_input_length"], 512);
    assert_eq!(before["runtimes"][0]["instances"], 4, "{before}");
    assert_eq!(before["policy"]["instances"]["dynamic:512x1"], 4, "{before}");

    // Only short inputs: the allocation moves instances to a short fixed runtime.
    let mut answered = 0;
    for _ in 0..30 {
        let (status, body) =
            post(&server.url, "/embed", r#"{"inputs": ["short text", "a few words"]}"#).await;
        assert_eq!(status, 200, "{body}");
        answered += body.as_array().unwrap().len();
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    assert_eq!(answered, 60);
    let after = info(&server.url).await;
    let policy = &after["policy"];
    assert!(policy["counters"]["allocations"].as_u64().unwrap() >= 1, "{policy}");
    assert!(policy["counters"]["replacements"].as_u64().unwrap() >= 1, "{policy}");
    let instances = policy["instances"].as_object().unwrap();
    let short: Vec<&String> = instances.keys().filter(|r| r.starts_with("fixed:")).collect();
    assert!(short.iter().any(|r| instances[*r].as_u64().unwrap() >= 1), "{policy}");
    assert!(policy["instances"]["dynamic:512x1"].as_u64().unwrap() >= 1, "the longest keeps one (Eq. 7)");
    let runtimes = after["runtimes"].as_array().unwrap();
    let fixed = runtimes.iter().find(|r| r["runtime"].as_str().unwrap().starts_with("fixed:"));
    let fixed =
        fixed.unwrap_or_else(|| panic!("a new worker runs a fixed runtime: {after}"))["runtime"].clone();

    // A long input still has its runtime.
    let long = vec!["word"; 400].join(" ");
    let (status, _) = post(&server.url, "/embed", &json!({ "inputs": long }).to_string()).await;
    assert_eq!(status, 200);

    let metrics = client().get(format!("{}/metrics", server.url)).send().await.unwrap().text().await.unwrap();
    let fixed = fixed.as_str().unwrap();
    assert!(metrics.contains(&format!("morph_policy_instances{{runtime=\"{fixed}\"}}")), "{metrics}");
    assert!(metrics.contains("morph_instances{runtime=\"dynamic:512x1\"}"), "{metrics}");
    assert!(metrics.contains("morph_policy_replacements_total"), "{metrics}");
    // Its fixed runtimes keep a dynamic fallback (late binding across classes), counted; past
    // the shortest one, it also runs the shorter classes' inputs (`/N`, the pooled backlog).
    assert!(fixed.contains("+512"), "{fixed}");
    assert!(metrics.contains("morph_policy_spilled_total"), "{metrics}");
    server.stop().await;
}
