//! Every field of OpenAI's chat, completions and embeddings requests is either honoured (the
//! call succeeds with it) or refused with a 422 that names it, never ignored; docs/api.md says
//! which, for every one of them, and the OpenAPI document lists exactly the honoured ones. That
//! document passes a real validator (openapi-spec-validator, from PyPI) and every path in it is
//! a route of the server.

use crate::common;

use common::{candle, decoder, post, start};
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Verdict {
    Honoured,
    Refused,
}

use Verdict::{Honoured, Refused};

/// OpenAI's request fields by route (the API reference, 2026), with a value a client sends.
fn fields() -> Vec<(&'static str, &'static str, Value, Verdict)> {
    let chat = "/v1/chat/completions";
    let completions = "/v1/completions";
    let embeddings = "/v1/embeddings";
    let responses = "/v1/responses";
    let mut table = vec![
        (embeddings, "input", json!(["a", "b"]), Honoured),
        (embeddings, "model", json!("all-MiniLM-L6-v2"), Honoured),
        (embeddings, "encoding_format", json!("base64"), Honoured),
        (embeddings, "dimensions", json!(384), Honoured),
        (embeddings, "user", json!("user-1"), Honoured),
        (chat, "messages", json!([{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]), Honoured),
        (chat, "audio", json!({"voice": "alloy", "format": "wav"}), Refused),
        (chat, "function_call", json!("auto"), Refused),
        (chat, "functions", json!([{"name": "f"}]), Refused),
        (chat, "logprobs", json!(true), Honoured),
        (chat, "top_logprobs", json!(2), Honoured),
        (chat, "max_completion_tokens", json!(2), Honoured),
        (chat, "metadata", json!({"k": "v"}), Refused),
        (chat, "modalities", json!(["text"]), Refused),
        (chat, "parallel_tool_calls", json!(false), Honoured),
        (chat, "prediction", json!({"type": "content", "content": "x"}), Refused),
        (chat, "prompt_cache_key", json!("k"), Refused),
        (chat, "reasoning_effort", json!("low"), Refused),
        (chat, "safety_identifier", json!("s"), Refused),
        (chat, "service_tier", json!("auto"), Refused),
        (chat, "store", json!(false), Refused),
        (chat, "tool_choice", json!("none"), Honoured),
        (chat, "tools", json!([]), Honoured),
        (chat, "verbosity", json!("low"), Refused),
        (chat, "web_search_options", json!({}), Refused),
        (completions, "prompt", json!(["One", "Two"]), Honoured),
        (completions, "best_of", json!(2), Refused),
        (completions, "echo", json!(true), Honoured),
        (completions, "logprobs", json!(2), Honoured),
        (completions, "suffix", json!("end"), Refused),
        (responses, "input", json!([{"role": "user", "content": "Hi"}]), Honoured),
        (responses, "model", json!("SmolLM2-135M-Instruct.Q4_1"), Honoured),
        (responses, "instructions", json!("Be brief."), Honoured),
        (responses, "max_output_tokens", json!(2), Honoured),
        (responses, "temperature", json!(0.5), Honoured),
        (responses, "top_p", json!(0.9), Honoured),
        (responses, "user", json!("user-1"), Honoured),
        (responses, "tools", json!([]), Honoured),
        (responses, "tool_choice", json!("none"), Honoured),
        (responses, "reasoning", json!({"effort": "low"}), Refused),
        (responses, "previous_response_id", json!("resp_1"), Refused),
        (responses, "text", json!({"format": {"type": "text"}}), Honoured),
        (responses, "include", json!([]), Refused),
        (responses, "metadata", json!({"k": "v"}), Refused),
        (responses, "parallel_tool_calls", json!(false), Honoured),
        (responses, "truncation", json!("auto"), Refused),
        (responses, "background", json!(false), Refused),
    ];
    // Fields both generation routes take alike.
    for route in [chat, completions] {
        table.extend([
            (route, "model", json!("SmolLM2-135M-Instruct.Q4_1"), Honoured),
            (route, "max_tokens", json!(2), Honoured),
            (route, "temperature", json!(0.5), Honoured),
            (route, "top_p", json!(0.9), Honoured),
            (route, "presence_penalty", json!(0.5), Honoured),
            (route, "frequency_penalty", json!(0.5), Honoured),
            (route, "seed", json!(3), Honoured),
            (route, "n", json!(2), Honoured),
            (route, "stop", json!(["\n", "."]), Honoured),
            (route, "stream", json!(true), Honoured),
            (route, "stream_options", json!({"include_usage": true}), Honoured),
            (route, "user", json!("user-1"), Honoured),
            (route, "response_format", json!({"type": "text"}), Honoured),
            (route, "logit_bias", json!({"30": -100}), Honoured),
        ]);
    }
    table
}

/// The call of `route` with `field` set: the route's required fields, answers kept short.
fn body(route: &str, field: &str, value: &Value) -> Value {
    let mut body = match route {
        "/v1/embeddings" => json!({"input": "Hello"}),
        "/v1/completions" => json!({"prompt": "Hello", "max_completion_tokens": 2}),
        "/v1/responses" => json!({"input": "Hello", "max_output_tokens": 2}),
        _ => json!({"messages": [{"role": "user", "content": "Hello"}], "max_completion_tokens": 2}),
    };
    if field == "max_tokens" || field == "max_completion_tokens" {
        body.as_object_mut().map(|b| b.remove("max_completion_tokens"));
    }
    if field == "stream_options" {
        body["stream"] = json!(true);
    }
    if field == "top_logprobs" {
        body["logprobs"] = json!(true);
    }
    body[field] = value.clone();
    body
}

#[tokio::test]
async fn every_openai_field_is_honoured_or_refused_by_name_as_the_docs_say() {
    let generate = start(decoder("fcfs", json!({}))).await;
    let embed = start(candle()).await;
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/api.md"))
        .expect("docs/api.md");
    let openapi =
        common::client().get(format!("{}/openapi.json", embed.url)).send().await.expect("openapi.json");
    let openapi: Value = openapi.json().await.expect("the OpenAPI document is JSON");
    for (route, field, value, verdict) in fields() {
        let url = if route == "/v1/embeddings" { &embed.url } else { &generate.url };
        let body = body(route, field, &value).to_string();
        let response = common::client()
            .post(format!("{url}{route}"))
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await
            .expect("call");
        let status = response.status().as_u16();
        let text = response.text().await.expect("body");
        match verdict {
            Honoured => assert_eq!(status, 200, "{route} {field}: {body} → {text}"),
            Refused => {
                assert_eq!(status, 422, "{route} {field}: {body} → {text}");
                let message: Value = serde_json::from_str(&text).expect("error JSON");
                let message = message["error"]["message"].as_str().unwrap_or_default().to_string();
                assert!(message.starts_with(field), "{route} {field}: the refusal must name it: {message}");
            }
        }
        let schema =
            &openapi["paths"][route]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"];
        let schema = schema.as_str().and_then(|r| r.rsplit('/').next()).expect("the route's request schema");
        let listed = !openapi["components"]["schemas"][schema]["properties"][field].is_null();
        assert_eq!(listed, verdict == Honoured, "openapi.json, {schema}: `{field}` listed only if honoured");
        let documented = documented(&docs, route, field);
        let word = if verdict == Honoured { "honoured" } else { "refused" };
        assert!(
            documented.as_deref().is_some_and(|d| d.contains(word)),
            "docs/api.md, {route}: `{field}` must be listed as {word}; found {documented:?}"
        );
    }
    generate.stop().await;
    embed.stop().await;
}

/// The docs' row for `field` in the table under `route`'s heading.
fn documented(docs: &str, route: &str, field: &str) -> Option<String> {
    let section = docs.split("\n### ").find(|s| s.starts_with(&format!("`{route}`")))?;
    let row = section.lines().find(|l| l.starts_with(&format!("| `{field}` |")))?;
    Some(row.to_string())
}

/// `n` and a list of prompts make as many choices, in OpenAI's order, the usage counting each
/// prompt once; `stop` cuts the text.
#[tokio::test]
async fn choices_come_per_prompt_and_per_n_and_stop_cuts_each() {
    let server = start(decoder("fcfs", json!({}))).await;
    let body = json!({"prompt": ["The capital of France is", "One, two,"], "n": 2, "max_tokens": 8,
        "temperature": 0});
    let (status, whole) = post(&server.url, "/v1/completions", &body.to_string()).await;
    assert_eq!(status, 200, "{whole}");
    let texts: Vec<&str> = whole["choices"]
        .as_array()
        .expect("choices")
        .iter()
        .map(|c| c["text"].as_str().unwrap_or_default())
        .collect();
    let indices: Vec<u64> =
        whole["choices"].as_array().expect("choices").iter().filter_map(|c| c["index"].as_u64()).collect();
    assert_eq!(indices, [0, 1, 2, 3]);
    // Greedy: both choices of a prompt are the same text, and the prompts differ.
    assert_eq!((texts[0], texts[2]), (texts[1], texts[3]), "{whole}");
    assert_ne!(texts[0], texts[2]);
    assert_eq!(whole["usage"]["completion_tokens"], 32, "{whole}");
    // The usage counts each prompt once however many choices it has, as OpenAI does.
    let once = json!({"prompt": ["The capital of France is", "One, two,"], "max_tokens": 1});
    let (status, once) = post(&server.url, "/v1/completions", &once.to_string()).await;
    assert_eq!(status, 200, "{once}");
    assert_eq!(whole["usage"]["prompt_tokens"], once["usage"]["prompt_tokens"], "{whole} {once}");
    // A stop string taken from inside the first answer cuts it there, with finish_reason stop.
    let first = texts[0];
    let stop = &first[first.len() / 2..first.len() / 2 + 1];
    let cut = &first[..first.find(stop).expect("stop in text")];
    let body = json!({"prompt": "The capital of France is", "max_tokens": 8, "temperature": 0, "stop": stop});
    let (status, stopped) = post(&server.url, "/v1/completions", &body.to_string()).await;
    assert_eq!(status, 200, "{stopped}");
    assert_eq!(stopped["choices"][0]["text"], cut, "{stopped}");
    assert_eq!(stopped["choices"][0]["finish_reason"], "stop");
    server.stop().await;
}

/// `/openapi.json` is a valid OpenAPI 3.1 document (openapi-spec-validator, installed by
/// `.ci/run`) of this build, `/docs` renders it, and each of its paths is served (none falls to
/// the 404 that lists the routes).
#[tokio::test]
async fn the_openapi_document_is_valid_and_its_paths_are_routes() {
    let server = start(candle()).await;
    let text = common::client().get(format!("{}/openapi.json", server.url)).send().await.expect("GET");
    let text = text.text().await.expect("body");
    let doc: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(doc["info"]["version"], env!("CARGO_PKG_VERSION"));
    // The page that renders it carries the same document.
    let page = common::client().get(format!("{}/docs", server.url)).send().await.expect("GET /docs");
    assert_eq!(page.status(), 200);
    let page = page.text().await.expect("the page");
    assert!(page.contains("/v1/chat/completions") && page.contains("<html"), "{page}");
    let file = tempfile::NamedTempFile::new().expect("a file");
    std::fs::write(file.path(), &text).expect("writing the document");
    let checked = std::process::Command::new("python3")
        .args(["-m", "openapi_spec_validator"])
        .arg(file.path())
        .output()
        .expect("python3 runs (the check needs: pip install openapi-spec-validator, as .ci/run does)");
    let said =
        String::from_utf8_lossy(&checked.stdout).to_string() + &String::from_utf8_lossy(&checked.stderr);
    assert!(checked.status.success(), "openapi-spec-validator: {said}");
    for (path, methods) in doc["paths"].as_object().expect("paths") {
        let path = path.replace("{id}", "all-MiniLM-L6-v2");
        for method in methods.as_object().expect("methods").keys() {
            let request = match method.as_str() {
                "post" => common::client().post(format!("{}{path}", server.url)).body("{}"),
                _ => common::client().get(format!("{}{path}", server.url)),
            };
            let answer = request.send().await.expect("an answer").text().await.expect("body");
            assert!(
                !answer.contains("no route"),
                "{method} {path} is in openapi.json but not served: {answer}"
            );
        }
    }
    server.stop().await;
}
