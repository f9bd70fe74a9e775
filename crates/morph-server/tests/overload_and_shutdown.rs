//! A bounded queue answers 429 with a reason when full; shutdown drains in-flight calls.

mod common;

use std::time::Duration;

use common::{client, emulated, post, start};
use morph_core::RuntimeSpec;

#[tokio::test]
async fn overload_is_429_with_a_reason_and_loses_nothing_admitted() {
    // One instance, one row per batch, 300 ms per batch, two sequences may wait.
    let server = start(emulated(300.0, RuntimeSpec::dynamic(64, 1), 2)).await;
    let calls: Vec<_> = (0..8)
        .map(|i| {
            let url = server.url.clone();
            tokio::spawn(
                async move { post(&url, "/embed", &format!(r#"{{"inputs": "request {i}"}}"#)).await },
            )
        })
        .collect();
    let mut ok = 0;
    let mut overloaded = 0;
    for call in calls {
        let (status, body) = call.await.unwrap();
        match status {
            200 => ok += 1,
            429 => {
                overloaded += 1;
                let msg = body["error"]["message"].as_str().unwrap_or_default();
                assert!(msg.contains("queue is full (2 sequences waiting)"), "{body}");
            }
            other => panic!("unexpected status {other}: {body}"),
        }
    }
    // All 8 arrive within the first batch's 300 ms: one runs, two wait, five are refused.
    assert_eq!((ok, overloaded), (3, 5));
    let metrics = client().get(format!("{}/metrics", server.url)).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("morph_request_failures_total{kind=\"overloaded\"} 5"), "{metrics}");
    server.stop().await;
}

#[tokio::test]
async fn shutdown_drains_in_flight_requests() {
    let mut server = start(emulated(400.0, RuntimeSpec::dynamic(64, 4), 16)).await;
    let url = server.url.clone();
    let in_flight = tokio::spawn(async move { post(&url, "/embed", r#"{"inputs": ["a", "b"]}"#).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    server.begin_shutdown();
    let (status, body) = in_flight.await.unwrap();
    assert_eq!(status, 200, "the in-flight call must complete: {body}");
    assert_eq!(body.as_array().map(Vec::len), Some(2));
    let join = server.join.take().unwrap();
    tokio::time::timeout(Duration::from_secs(5), join)
        .await
        .expect("server stops after draining")
        .unwrap()
        .unwrap();
    let refused = client().get(format!("{}/health", server.url)).send().await;
    assert!(refused.is_err(), "a stopped server accepts no connections");
}
