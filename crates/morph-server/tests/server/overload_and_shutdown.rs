//! A bounded queue answers 429 with a reason and `Retry-After` when full, for embeddings and
//! generation; shutdown drains in-flight calls, and those left at the drain deadline get a
//! typed 503.

use crate::common;

use std::time::Duration;

use common::{client, decoder, emulated, post, start};
use morph_core::RuntimeSpec;
use morph_server::{ConnectionLimits, Deployment};

/// `n` `/embed` calls sent at once, each of one text.
fn embeds_at_once(url: &str, n: usize) -> Vec<tokio::task::JoinHandle<(u16, serde_json::Value)>> {
    (0..n)
        .map(|i| {
            let url = url.to_string();
            tokio::spawn(
                async move { post(&url, "/embed", &format!(r#"{{"inputs": "request {i}"}}"#)).await },
            )
        })
        .collect()
}

#[tokio::test]
async fn overload_is_429_with_a_reason_and_loses_nothing_admitted() {
    // One instance, one row per batch, 300 ms per batch, two sequences may wait.
    let server = start(emulated(300.0, RuntimeSpec::dynamic(64, 1), 2)).await;
    let calls = embeds_at_once(&server.url, 8);
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

/// With a deadline, calls that can no longer start in time are answered 504 at once (counted by
/// the policy), the others are served, and every call gets one of the two.
#[tokio::test]
async fn calls_that_can_no_longer_be_in_time_are_given_up_with_504_and_the_rest_served() {
    // One instance, one row per batch, a second per batch, a 100 ms deadline.
    let mut deployment = emulated(1000.0, RuntimeSpec::dynamic(64, 1), 16);
    deployment.policy_context.deadline = Some(100_000_000);
    let server = start(deployment).await;
    let calls = embeds_at_once(&server.url, 6);
    let (mut ok, mut given_up) = (0, 0);
    for call in calls {
        let (status, body) = call.await.unwrap();
        match status {
            200 => ok += 1,
            504 => {
                given_up += 1;
                let msg = body["error"]["message"].as_str().unwrap_or_default();
                assert!(msg.contains("its deadline (100 ms after arrival) can no longer be met"), "{body}");
                assert_eq!(body["error"]["type"], "deadline", "{body}");
            }
            other => panic!("unexpected status {other}: {body}"),
        }
    }
    // The first call starts at once and finishes; calls arriving while a batch runs wait a
    // second at least, past their 100 ms.
    assert!(ok >= 1 && given_up >= 1, "{ok} served, {given_up} given up");
    let metrics = client().get(format!("{}/metrics", server.url)).send().await.unwrap().text().await.unwrap();
    let counted = metrics
        .lines()
        .find(|l| l.starts_with("morph_policy_given_up_late_total"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok());
    assert_eq!(counted, Some(given_up as f64), "{metrics}");
    server.stop().await;
}

/// On a generator the deadline is one to start: chats that have not started by then are
/// given up with 504 (counted), the ones that started run to their end, and a chat sent once
/// the batch is free is served.
#[tokio::test]
async fn chats_that_cannot_start_by_the_deadline_are_given_up_and_started_ones_finish() {
    // A continuous batch of 2 and a 200 ms deadline: 128 tokens take seconds on a CPU, so the
    // chats beyond the first two wait past it.
    let mut deployment = decoder("fcfs", serde_json::json!({}));
    deployment.policy_context.deadline = Some(200_000_000);
    let server = start(deployment).await;
    let chat = |max_tokens: u32| {
        let content = "Write a long story about a cat.";
        serde_json::json!({"messages": [{"role": "user", "content": content}], "max_tokens": max_tokens, "temperature": 0})
            .to_string()
    };
    let calls: Vec<_> = (0..6)
        .map(|_| {
            let (url, body) = (server.url.clone(), chat(128));
            tokio::spawn(async move { post(&url, "/v1/chat/completions", &body).await })
        })
        .collect();
    let (mut answered, mut given_up) = (0, 0);
    for call in calls {
        match call.await.expect("joined") {
            (200, body) => {
                assert_eq!(
                    body["choices"][0]["finish_reason"], "length",
                    "a started chat runs to its end: {body}"
                );
                answered += 1;
            }
            (504, body) => {
                assert_eq!(body["error"]["type"], "deadline", "{body}");
                given_up += 1;
            }
            (status, body) => panic!("{status}: {body}"),
        }
    }
    assert!(answered >= 2 && given_up >= 1, "{answered} answered, {given_up} given up");
    let (status, body) = post(&server.url, "/v1/chat/completions", &chat(4)).await;
    assert_eq!(status, 200, "the batch is free again: {body}");
    let metrics = client().get(format!("{}/metrics", server.url)).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains(&format!("morph_policy_given_up_late_total {given_up}")), "{metrics}");
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

/// 300 chats at once on the default generation layout (a continuous batch of 2 here, 16 may
/// wait): each gets an answer or a 429 that says why and when to come back; none is left
/// waiting behind a queue longer than its bound.
#[tokio::test]
async fn three_hundred_concurrent_chats_get_answers_or_429s_with_retry_after() {
    let server = start(decoder("fcfs", serde_json::json!({ "max_queue": 16 }))).await;
    let body = r#"{"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 4, "temperature": 0}"#;
    let calls: Vec<_> = (0..300)
        .map(|_| {
            let url = server.url.clone();
            tokio::spawn(async move {
                let response = client()
                    .post(format!("{url}/v1/chat/completions"))
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await
                    .expect("an answer");
                let retry_after =
                    response.headers().get("retry-after").map(|v| v.to_str().unwrap_or("").to_string());
                let status = response.status().as_u16();
                (status, retry_after, response.json::<serde_json::Value>().await.expect("JSON"))
            })
        })
        .collect();
    let (mut answered, mut refused) = (0, 0);
    for call in calls {
        match call.await.expect("joined") {
            (200, _, body) => {
                assert_eq!(body["usage"]["completion_tokens"], 4, "{body}");
                answered += 1;
            }
            (429, retry_after, body) => {
                assert_eq!(retry_after.as_deref(), Some("1"), "{body}");
                assert_eq!(body["error"]["type"], "overloaded", "{body}");
                assert!(
                    body["error"]["message"].as_str().unwrap_or("").contains("16 sequences waiting"),
                    "{body}"
                );
                refused += 1;
            }
            (status, _, body) => panic!("{status}: {body}"),
        }
    }
    assert_eq!(answered + refused, 300);
    // At least the batch's 2 and the queue's 16 are served, and the bound turned calls away.
    assert!(answered >= 18 && refused > 0, "{answered} answered, {refused} refused");
    server.stop().await;
}

/// At the drain deadline every call still waiting or running is answered with a typed 503 (a
/// stream gets it as its last event), none cut without an answer.
#[tokio::test]
async fn the_drain_deadline_answers_every_call_left_with_shutting_down() {
    let config = Deployment {
        limits: ConnectionLimits { drain_timeout: Duration::from_millis(500), ..Default::default() },
        ..decoder("fcfs", serde_json::json!({}))
    };
    let mut server = start(config).await;
    let long = |stream: bool| {
        serde_json::json!({"prompt": "Once upon a time", "max_tokens": 1000, "temperature": 0, "stream": stream})
            .to_string()
    };
    // A stream runs (its headers came with its first token), then one more runs and two wait.
    let stream = client().post(format!("{}/v1/completions", server.url)).body(long(true)).send().await;
    let stream = stream.expect("the stream starts");
    assert_eq!(stream.status().as_u16(), 200);
    let calls: Vec<_> = (0..3)
        .map(|_| {
            let (url, body) = (server.url.clone(), long(false));
            tokio::spawn(async move {
                let response = client()
                    .post(format!("{url}/v1/completions"))
                    .body(body)
                    .send()
                    .await
                    .expect("an answer");
                (response.status().as_u16(), response.text().await.expect("body"))
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.begin_shutdown();
    let streamed = stream.text().await.expect("the stream ends with an answer");
    let events: Vec<&str> = streamed.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
    assert_eq!(events.last(), Some(&"[DONE]"), "{streamed}");
    let last: serde_json::Value = serde_json::from_str(events[events.len() - 2]).expect("JSON event");
    assert_eq!(last["error"]["type"], "shutting_down", "{last}");
    for call in calls {
        let (status, body) = call.await.expect("every call is answered");
        assert_eq!(status, 503, "{body}");
        let body: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(body["error"]["type"], "shutting_down", "{body}");
    }
    server.join.take().expect("join").await.expect("server task").expect("server io");
}

/// The value of the unlabelled metric `name` in the server's `/metrics`.
async fn metric(url: &str, name: &str) -> f64 {
    let response = client().get(format!("{url}/metrics")).send().await.expect("GET /metrics");
    let text = response.text().await.expect("the metrics' text");
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

/// A call that finds the queue full is refused before its texts are tokenized: past saturation
/// the refusals leave the cores to the batches.
#[tokio::test]
async fn a_call_that_finds_the_queue_full_is_refused_before_it_is_tokenized() {
    // One instance, one row per batch, two seconds per batch, one sequence may wait.
    let server = start(emulated(2000.0, RuntimeSpec::dynamic(64, 1), 1)).await;
    let admitted = embeds_at_once(&server.url, 2);
    while metric(&server.url, "morph_queue_sequences").await < 1.0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let tokenized = metric(&server.url, "morph_tokenization_seconds_count").await;
    assert_eq!(tokenized, 2.0);
    let (status, body) = post(&server.url, "/embed", r#"{"inputs": "one too many"}"#).await;
    assert_eq!(status, 429, "{body}");
    assert!(body["error"]["message"].as_str().unwrap_or_default().contains("queue is full"), "{body}");
    assert_eq!(metric(&server.url, "morph_tokenization_seconds_count").await, tokenized, "not tokenized");
    for call in admitted {
        assert_eq!(call.await.unwrap().0, 200);
    }
    server.stop().await;
}
