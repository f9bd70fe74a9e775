//! `/metrics` as Prometheus reads it: `promtool check metrics` (Debian's `prometheus` package,
//! installed by `.ci/run`) parses each server's exposition, the policy's own series included, and
//! finds no naming problem or missing help; calls are counted by route and status, failures
//! timed too; each server exports only the families of what it serves, and the process's own.

use crate::common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::{candle, client, decoder, post, start};

async fn scrape(url: &str) -> String {
    client().get(format!("{url}/metrics")).send().await.expect("scrape").text().await.expect("text")
}

/// promtool's verdict on `exposition`: its exit status and what it said.
fn promtool(exposition: &str) -> (bool, String) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool runs (Debian: apt-get install prometheus, as .ci/run does)");
    child.stdin.take().expect("stdin").write_all(exposition.as_bytes()).expect("writing to promtool");
    let out = child.wait_with_output().expect("promtool's verdict");
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), said)
}

#[tokio::test]
async fn each_servers_metrics_pass_promtool_and_hold_only_its_own_families() {
    // With a deadline, so that the policy's own series (given up late) are exported too.
    let mut deployment = candle();
    deployment.policy_context.deadline = Some(60_000_000_000);
    let embed = start(deployment).await;
    let (status, _) = post(&embed.url, "/v1/embeddings", r#"{"input": ["a", "b"]}"#).await;
    assert_eq!(status, 200);
    let (status, _) = post(&embed.url, "/v1/embeddings", r#"{"input": 3}"#).await;
    assert_eq!(status, 422);
    let text = scrape(&embed.url).await;
    let (ok, said) = promtool(&text);
    assert!(ok && said.trim().is_empty(), "promtool on the embedding server:\n{said}\n{text}");
    for series in [
        "morph_requests_total{route=\"/v1/embeddings\",status=\"200\"} 1\n",
        "morph_requests_total{route=\"/v1/embeddings\",status=\"422\"} 1\n",
        "morph_request_duration_seconds_count{route=\"/v1/embeddings\",status=\"422\"} 1\n",
        "morph_request_duration_seconds_bucket{route=\"/v1/embeddings\",status=\"200\",le=\"300\"} 1\n",
        "morph_request_failures_total{kind=\"validation\"} 1\n",
        "morph_batch_padded_tokens_count",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "# HELP morph_policy_given_up_late_total ",
    ] {
        assert!(text.contains(series), "{series} in\n{text}");
    }
    assert!(!text.contains("morph_time_to_first_token_seconds"), "an encoder has no generation families");

    let generate = start(decoder("fcfs", serde_json::json!({}))).await;
    let (status, _) = post(&generate.url, "/v1/completions", r#"{"prompt": "Hi", "max_tokens": 3}"#).await;
    assert_eq!(status, 200);
    let text = scrape(&generate.url).await;
    let (ok, said) = promtool(&text);
    assert!(ok && said.trim().is_empty(), "promtool on the generation server:\n{said}\n{text}");
    for series in [
        "morph_time_to_first_token_seconds_count 1\n",
        "morph_decode_iteration_seconds_bucket",
        "morph_prompt_tokens_total",
    ] {
        assert!(text.contains(series), "{series} in\n{text}");
    }
    assert!(!text.contains("morph_batch_padded_tokens"), "a decoder has no encoder batch families");
    embed.stop().await;
    generate.stop().await;
}
