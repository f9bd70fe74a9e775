//! A client that leaves frees its place: on SmolLM2 with one slot, a streamed chat whose client
//! disconnects after two chunks stops at the decoder's next iteration, the slot goes to the
//! request queued behind it, and `/metrics` counts the cancellation; a client that leaves a whole
//! chat is counted as a call of status 499.

use crate::common;

use std::time::Duration;

use common::{client, decoder, post, start};
use serde_json::json;

/// `name value` of one series in a `/metrics` text.
fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no series {name} in /metrics"))
}

async fn metrics(url: &str) -> String {
    client().get(format!("{url}/metrics")).send().await.expect("metrics").text().await.expect("metrics body")
}

#[tokio::test]
async fn a_client_that_leaves_a_streamed_chat_stops_its_generation_and_frees_the_slot() {
    let one_slot = json!({"batching": {"mode": "continuous", "max_batch": 1}});
    let server = start(decoder("fcfs", one_slot)).await;
    let max_tokens = 400;
    let long = json!({
        "messages": [{"role": "user", "content": "Write a very long story about a dragon and a knight."}],
        "max_tokens": max_tokens, "temperature": 0, "stream": true,
    });
    let mut stream = client()
        .post(format!("{}/v1/chat/completions", server.url))
        .header("content-type", "application/json")
        .body(long.to_string())
        .send()
        .await
        .expect("stream starts");
    assert_eq!(stream.status(), 200);
    let mut seen = String::new();
    while seen.matches("data: ").count() < 2 {
        let chunk = stream.chunk().await.expect("a chunk").expect("the stream goes on");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }

    // A second chat queues behind the first (one slot).
    let url = server.url.clone();
    let short = json!({"messages": [{"role": "user", "content": "What is the capital of France?"}],
        "max_tokens": 5, "temperature": 0});
    let queued = tokio::spawn(async move { post(&url, "/v1/chat/completions", &short.to_string()).await });
    let mut waited = 0;
    while metric(&metrics(&server.url).await, "morph_queue_sequences") < 1.0 {
        waited += 1;
        assert!(waited < 600, "the second chat never queued");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    drop(stream); // the first client leaves after two chunks
    let (status, body) = queued.await.expect("second chat");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["usage"]["completion_tokens"], 5, "{body}");

    let text = metrics(&server.url).await;
    assert_eq!(metric(&text, "morph_cancellations_total{kind=\"stopped\"}"), 1.0, "{text}");
    // The token count arrives with each iteration's report, a moment after the stream's last
    // event: wait until it stops moving (nothing runs any more), then read it.
    let mut generated = metric(&text, "morph_generated_tokens_total");
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = metric(&metrics(&server.url).await, "morph_generated_tokens_total");
        if now == generated {
            break;
        }
        generated = now;
    }
    let first = generated - 5.0;
    assert!(
        first >= 2.0 && first < f64::from(max_tokens),
        "the first chat made {first} tokens of {max_tokens}"
    );
    println!("the first chat stopped after {first} of its {max_tokens} tokens");

    // A client that leaves a whole (not streamed) chat before its answer: the call is counted,
    // with nginx's 499, as well as its generation's cancellation.
    let whole = json!({"messages": long["messages"], "max_tokens": max_tokens, "temperature": 0});
    let left = client()
        .post(format!("{}/v1/chat/completions", server.url))
        .header("content-type", "application/json")
        .body(whole.to_string())
        .timeout(Duration::from_millis(300))
        .send()
        .await;
    assert!(left.is_err(), "the call was answered within 300 ms: {left:?}");
    let series = "morph_requests_total{route=\"/v1/chat/completions\",status=\"499\"}";
    let mut waited = 0;
    while !metrics(&server.url).await.contains(series) {
        waited += 1;
        assert!(waited < 600, "{series} never counted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(metric(&metrics(&server.url).await, series), 1.0);
    server.stop().await;
}
