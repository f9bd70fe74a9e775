//! The HTTP API end to end: every endpoint and every error case, on 127.0.0.1 port 0.

use crate::common;

use common::{candle, client, emulated, ort, post, start};
use morph_core::RuntimeSpec;
use morph_server::Deployment;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn error_message(body: &serde_json::Value) -> String {
    body["error"]["message"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn candle_embeddings_from_the_real_model_in_both_formats() {
    real_embeddings(candle(), "candle").await;
}

#[tokio::test]
async fn onnx_runtime_embeddings_from_the_real_model_in_both_formats() {
    real_embeddings(ort(), "onnxruntime").await;
}

/// The reference vectors hold on the default layout: one single-threaded instance per core,
/// batches shaped by length buckets (a short and a long input never share one).
#[tokio::test]
async fn onnx_runtime_embeddings_with_length_buckets_and_an_instance_per_core() {
    let buckets = serde_json::json!([{"max_len": 10, "max_rows": 8}, {"max_len": 64, "max_rows": 2}]);
    let config = Deployment {
        runtimes: vec![RuntimeSpec::dynamic(512, 8)],
        instances: 2,
        threads: Some(1),
        policy_params: serde_json::json!({ "max_queue": 64, "buckets": buckets }),
        ..ort()
    };
    real_embeddings(config, "onnxruntime").await;
}

/// all-MiniLM-L6-v2's sentence-transformers config says 256 tokens (its positions go to 512):
/// a longer text is refused there, or cut there when asked, as sentence-transformers and TEI do,
/// though the runtime takes 512.
#[tokio::test]
async fn a_text_past_the_models_max_seq_length_is_refused_or_cut_there() {
    let server = start(Deployment { runtimes: vec![RuntimeSpec::dynamic(512, 4)], ..ort() }).await;
    let info: serde_json::Value =
        client().get(format!("{}/info", server.url)).send().await.unwrap().json().await.unwrap();
    assert_eq!(info["max_input_length"], 256, "{info}");
    assert_eq!(info["runtimes"][0]["runtime"], "dynamic:512x4", "{info}");
    // "word" is one token: 300 of them and the two special tokens are 302.
    let long = "word ".repeat(300);
    let (status, body) = post(&server.url, "/embed", &serde_json::json!({"inputs": long}).to_string()).await;
    assert_eq!(status, 413, "{body}");
    assert!(error_message(&body).contains("302 tokens, more than this server takes (256"), "{body}");
    let embed = |inputs: String, truncate: bool| {
        let url = server.url.clone();
        async move {
            let body = serde_json::json!({"inputs": inputs, "truncate": truncate}).to_string();
            let (status, body) = post(&url, "/embed", &body).await;
            assert_eq!(status, 200, "{body}");
            serde_json::from_value::<Vec<Vec<f32>>>(body).expect("vectors").remove(0)
        }
    };
    let cut = embed(long, true).await;
    let fits = embed("word ".repeat(254), false).await;
    assert_eq!(cut, fits, "cut to the model's 256 tokens, the closing token kept");
    // Cut from the start ("left", as TEI), the opening token kept: the last 254 words stay.
    let led = format!("{}{}", "opening ".repeat(100), "word ".repeat(254));
    let body = serde_json::json!({"inputs": led, "truncate": true, "truncation_direction": "left"});
    let (status, body) = post(&server.url, "/embed", &body.to_string()).await;
    assert_eq!(status, 200, "{body}");
    let left = serde_json::from_value::<Vec<Vec<f32>>>(body).expect("vectors").remove(0);
    assert_eq!(left, fits, "cut from the start");
    server.stop().await;
}

/// A model's sentence-transformers prompts go before its texts as TEI puts them: the one a call
/// names, else the server's `--default-prompt-name`, else none; the vector is the prompted
/// text's. A name the model lacks is refused by name, at a call or at the start. Cohere's
/// `input_type` chooses the prompt; its `max_tokens` keeps a text's first tokens, or with
/// `truncate: "START"` its last.
#[tokio::test]
async fn a_prompt_named_or_by_default_goes_before_each_text() {
    let default = morph_fetch::fetch(&morph_fetch::ModelSource::Default, &morph_fetch::morph_home())
        .expect("fetching the default model");
    let dir = tempfile::tempdir().expect("a model directory");
    for entry in std::fs::read_dir(&default.dir).expect("the default model").flatten() {
        std::os::unix::fs::symlink(entry.path(), dir.path().join(entry.file_name())).expect("a link");
    }
    let config =
        r#"{"prompts": {"query": "query: ", "passage": "passage: "}, "default_prompt_name": "query"}"#;
    std::fs::write(dir.path().join("config_sentence_transformers.json"), config).expect("the prompts");
    let model =
        morph_fetch::fetch(&morph_fetch::ModelSource::Local(dir.path().into()), &morph_fetch::morph_home())
            .expect("the model directory");
    let served = |default_prompt_name: Option<&str>| Deployment {
        model: Some(model.clone()),
        default_prompt_name: default_prompt_name.map(str::to_string),
        ..candle()
    };
    let vectors = |url: String, route: &'static str, body: serde_json::Value| async move {
        let (status, answer) = post(&url, route, &body.to_string()).await;
        assert_eq!(status, 200, "{body}: {answer}");
        match route {
            "/embed" => serde_json::from_value::<Vec<Vec<f32>>>(answer).expect("vectors").remove(0),
            "/v2/embed" => serde_json::from_value::<Vec<f32>>(answer["embeddings"]["float"][0].clone())
                .expect("a vector"),
            _ => {
                serde_json::from_value::<Vec<f32>>(answer["data"][0]["embedding"].clone()).expect("a vector")
            }
        }
    };

    let server = start(served(None)).await;
    let url = || server.url.clone();
    let named =
        vectors(url(), "/embed", serde_json::json!({"inputs": "hello", "prompt_name": "query"})).await;
    let written = vectors(url(), "/embed", serde_json::json!({"inputs": "query: hello"})).await;
    let bare = vectors(url(), "/embed", serde_json::json!({"inputs": "hello"})).await;
    assert_eq!(named, written, "the prompt goes before the text");
    assert_ne!(named, bare, "without a default, a call that names none gets none");
    // /tokenize shows the tokens a text embeds as, the prompt's among them.
    let (status, tokens) =
        post(&server.url, "/tokenize", r#"{"inputs": "hello", "prompt_name": "query"}"#).await;
    assert_eq!(status, 200, "{tokens}");
    let words: Vec<&str> =
        tokens[0].as_array().expect("tokens").iter().filter_map(|t| t["text"].as_str()).collect();
    assert_eq!(words, ["[CLS]", "query", ":", "hello", "[SEP]"], "{tokens}");
    // Cohere's max_tokens keeps a text's first tokens, or with truncate START its last.
    let cohere = |truncate: &str| {
        let body =
            serde_json::json!({"texts": ["one two three four"], "max_tokens": 2, "truncate": truncate});
        vectors(url(), "/v2/embed", body)
    };
    let (first, last) = (cohere("END").await, cohere("START").await);
    assert_eq!(first, vectors(url(), "/embed", serde_json::json!({"inputs": "one two"})).await);
    assert_eq!(last, vectors(url(), "/embed", serde_json::json!({"inputs": "three four"})).await);
    let (status, body) = post(&server.url, "/embed", r#"{"inputs": "hello", "prompt_name": "doc"}"#).await;
    assert_eq!(status, 422, "{body}");
    assert!(
        error_message(&body).contains("\"doc\" is not one of the model's prompts: passage, query"),
        "{body}"
    );
    server.stop().await;

    let server = start(served(Some("passage"))).await;
    let url = || server.url.clone();
    let info: serde_json::Value =
        client().get(format!("{}/info", server.url)).send().await.unwrap().json().await.unwrap();
    assert_eq!(
        (&info["prompts"], &info["default_prompt_name"]),
        (&serde_json::json!(["passage", "query"]), &serde_json::json!("passage")),
        "{info}"
    );
    let by_default = vectors(url(), "/v1/embeddings", serde_json::json!({"input": "hello"})).await;
    let passage =
        vectors(url(), "/embed", serde_json::json!({"inputs": "hello", "prompt_name": "passage"})).await;
    let query =
        vectors(url(), "/embed", serde_json::json!({"inputs": "hello", "prompt_name": "query"})).await;
    assert_eq!(by_default, passage, "the default prompt goes before a text whose call names none");
    assert_eq!(query, named, "a named prompt goes before the default");
    // Cohere's input_type chooses the prompt: search_query the model's `query`, search_document
    // its `passage`; a kind the model has no prompt for gets none, not the default.
    let cohere = |input_type: &str| {
        vectors(url(), "/v2/embed", serde_json::json!({"texts": ["hello"], "input_type": input_type}))
    };
    assert_eq!(cohere("search_query").await, query, "search_query: the query prompt");
    assert_eq!(cohere("search_document").await, passage, "search_document: the passage prompt");
    assert_eq!(cohere("clustering").await, bare, "no clustering prompt: none");
    server.stop().await;

    let Err(refused) = morph_server::Server::build(served(Some("doc"))) else { panic!("built") };
    let refused = refused.to_string();
    assert!(refused.contains("--default-prompt-name doc"), "{refused}");
}

async fn real_embeddings(config: Deployment, engine: &str) {
    let server = start(config).await;
    let info: serde_json::Value = client()
        .get(format!("{}/info", server.url))
        .send()
        .await
        .expect("info")
        .json()
        .await
        .expect("info JSON");
    assert_eq!(info["engine"], engine, "{info}");
    let (status, body) = post(
        &server.url,
        "/v1/embeddings",
        r#"{"input":"This is an example sentence","model":"all-MiniLM-L6-v2"}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["object"], "list");
    assert_eq!(body["model"], "all-MiniLM-L6-v2");
    assert_eq!(body["usage"]["prompt_tokens"], 7);
    let v: Vec<f64> = serde_json::from_value(body["data"][0]["embedding"].clone()).expect("embedding");
    assert_eq!(v.len(), 384);
    assert!((v[0] - 0.0677).abs() < 1e-3 && (v[1] - 0.0635).abs() < 1e-3, "{:?}", &v[..2]);

    let (status, body) =
        post(&server.url, "/embed", r#"{"inputs":["a man eats","hello"],"normalize":false}"#).await;
    assert_eq!(status, 200, "{body}");
    let vs: Vec<Vec<f64>> = serde_json::from_value(body).expect("vectors");
    assert_eq!(vs.len(), 2);
    let norm = vs[0].iter().map(|x| x * x).sum::<f64>().sqrt();
    assert!((norm - 1.0).abs() > 1e-3, "normalize=false must return the raw pooled vector");
    server.stop().await;
}

#[tokio::test]
async fn health_info_and_metrics() {
    let server = start(emulated(1.0, RuntimeSpec::fixed(128, 4), 16)).await;
    let c = client();
    let health: serde_json::Value =
        c.get(format!("{}/health", server.url)).send().await.unwrap().json().await.unwrap();
    assert_eq!(health["status"], "ok");
    let info: serde_json::Value =
        c.get(format!("{}/info", server.url)).send().await.unwrap().json().await.unwrap();
    assert_eq!(info["engine"], "emulated");
    assert_eq!(info["max_input_length"], 128);
    assert_eq!(info["runtimes"][0]["runtime"], "fixed:128x4");
    assert_eq!(info["policy"]["name"], "dynamic-batching");
    let (status, _) = post(&server.url, "/embed", r#"{"inputs":["one","two"]}"#).await;
    assert_eq!(status, 200);
    let metrics = c.get(format!("{}/metrics", server.url)).send().await.unwrap().text().await.unwrap();
    for needle in [
        "morph_requests_total{route=\"/embed\",status=\"200\"} 1",
        "morph_queue_sequences 0",
        "morph_batch_sequences_count",
        "morph_request_input_tokens_count 2",
        "morph_tokenization_seconds_count 1",
        "morph_queue_seconds_count 2",
        "morph_inference_seconds_count",
        "morph_batch_padded_tokens_bucket{le=\"512\"}",
        "morph_instances{runtime=\"fixed:128x4\"} 1",
    ] {
        assert!(metrics.contains(needle), "missing {needle} in\n{metrics}");
    }
    server.stop().await;
}

#[tokio::test]
async fn bad_input_gets_a_clear_error_naming_the_field() {
    let server = start(emulated(1.0, RuntimeSpec::dynamic(16, 4), 16)).await;
    let long = "word ".repeat(40);
    let cases: Vec<(&str, String, u16, &str)> = vec![
        ("/embed", r#"{"inputs": "a"#.into(), 400, "malformed JSON"),
        ("/embed", "[1, 2]".into(), 422, "body: must be a JSON object"),
        ("/embed", "{}".into(), 422, "inputs: is required"),
        ("/embed", r#"{"inputs": ""}"#.into(), 422, "inputs: must not be empty"),
        ("/embed", r#"{"inputs": []}"#.into(), 422, "inputs: must not be an empty array"),
        ("/embed", r#"{"inputs": ["a", 5]}"#.into(), 422, "inputs[1]: must be a string"),
        ("/embed", r#"{"inputs": ["a","b","c","d","e"]}"#.into(), 422, "at most 4 per call"),
        ("/embed", r#"{"inputs": "a", "normalize": "yes"}"#.into(), 422, "normalize: must be true or false"),
        ("/embed", format!(r#"{{"inputs": ["ok", "{long}"]}}"#), 413, "inputs[1] has 42 tokens"),
        ("/v1/embeddings", r#"{"input": 3}"#.into(), 422, "input: must be a string, an array of strings"),
        ("/v1/embeddings", r#"{"input": "a", "model": "gpt-4"}"#.into(), 404, "model 'gpt-4' is not served"),
        ("/v1/embeddings", r#"{"input": "a", "encoding_format": "int8"}"#.into(), 422, "encoding_format"),
        ("/v1/embeddings", format!(r#"{{"input": "{long}"}}"#), 413, "send \"truncate\": true"),
    ];
    for (path, body, want_status, want_text) in cases {
        let (status, json) = post(&server.url, path, &body).await;
        assert_eq!(status, want_status, "{path} {body}: {json}");
        assert!(error_message(&json).contains(want_text), "{path} {body}: {json}");
    }
    let (status, json) =
        post(&server.url, "/embed", &format!(r#"{{"inputs": "{long}", "truncate": true}}"#)).await;
    assert_eq!(status, 200, "truncate=true must cut the input: {json}");
    let metrics = client().get(format!("{}/metrics", server.url)).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("morph_request_failures_total{kind=\"too_long\"} 2"), "{metrics}");
    assert!(metrics.contains("morph_request_failures_total{kind=\"validation\"} 10"), "{metrics}");
    server.stop().await;
}

#[tokio::test]
async fn api_key_guards_everything_but_health_metrics_and_the_document() {
    let mut config = emulated(1.0, RuntimeSpec::dynamic(64, 4), 16);
    config.api_key = Some("s3cret".into());
    let server = start(config).await;
    let c = client();
    let call = |key: Option<&'static str>| {
        let mut req = c.post(format!("{}/embed", server.url)).json(&serde_json::json!({"inputs": "hi"}));
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        async move { req.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(call(None).await, 401);
    assert_eq!(call(Some("wrong")).await, 401);
    assert_eq!(call(Some("s3cret")).await, 200);
    assert_eq!(c.get(format!("{}/info", server.url)).send().await.unwrap().status().as_u16(), 401);
    assert_eq!(c.get(format!("{}/health", server.url)).send().await.unwrap().status().as_u16(), 200);
    // The open document does not name the model (an unkeyed server's lists its names).
    let document = c.get(format!("{}/openapi.json", server.url)).send().await.unwrap();
    assert_eq!(document.status().as_u16(), 200);
    let document: serde_json::Value = document.json().await.unwrap();
    let model = &document["components"]["schemas"]["EmbeddingsRequest"]["properties"]["model"];
    assert!(model.is_object() && model["enum"].is_null(), "{model}");
    let metrics = c.get(format!("{}/metrics", server.url)).send().await.unwrap();
    assert_eq!(metrics.status().as_u16(), 200);
    let metrics = metrics.text().await.unwrap();
    // Refused calls are calls: 3 refused, 1 served.
    assert!(metrics.contains("morph_requests_total{route=\"/embed\",status=\"401\"} 2\n"), "{metrics}");
    assert!(metrics.contains("morph_requests_total{route=\"/info\",status=\"401\"} 1\n"), "{metrics}");
    assert!(metrics.contains("morph_requests_total{route=\"/embed\",status=\"200\"} 1\n"), "{metrics}");
    assert!(metrics.contains("morph_request_failures_total{kind=\"unauthorized\"} 3"), "{metrics}");
    server.stop().await;
}

/// A body over the limit is refused like every other error: JSON, its own type, counted; one
/// whose `Content-Length` says so is refused before it is read (not after the body timeout).
#[tokio::test]
async fn an_oversize_body_is_a_json_413_of_its_own_kind_and_counted() {
    let server = start(emulated(1.0, RuntimeSpec::dynamic(64, 4), 16)).await;
    let huge = format!(r#"{{"input": "{}"}}"#, "a ".repeat(1_500_000));
    for path in ["/v1/embeddings", "/embed"] {
        let resp = client()
            .post(format!("{}{path}", server.url))
            .header("content-type", "application/json")
            .body(huge.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 413, "{path}");
        let body: serde_json::Value = resp.json().await.expect("a JSON error body");
        assert_eq!(body["error"]["type"], "body_too_large", "{body}");
        assert!(error_message(&body).contains("larger than the limit of 2097152 bytes"), "{body}");
    }
    // Only the head, declaring 3 MiB: the answer comes without the body.
    let address = server.url.trim_start_matches("http://").to_string();
    let mut stream = tokio::net::TcpStream::connect(&address).await.expect("a connection");
    let head = format!(
        "POST /embed HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        3 * 1024 * 1024
    );
    stream.write_all(head.as_bytes()).await.expect("the head");
    let (mut answer, mut buffer) = (String::new(), vec![0; 1024]);
    while !answer.contains("body_too_large") {
        let read = stream.read(&mut buffer).await.expect("an answer");
        if read == 0 {
            break;
        }
        answer.push_str(&String::from_utf8_lossy(&buffer[..read]));
    }
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("body_too_large"), "{answer}");
    let metrics = client().get(format!("{}/metrics", server.url)).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("morph_request_failures_total{kind=\"body_too_large\"} 3"), "{metrics}");
    for (route, count) in [("/v1/embeddings", 1), ("/embed", 2)] {
        let series = format!("morph_requests_total{{route=\"{route}\",status=\"413\"}} {count}\n");
        assert!(metrics.contains(&series), "{series} in {metrics}");
    }
    server.stop().await;
}

/// TEI's tokenizer routes on the real tokenizer: `/tokenize` gives ids that embed as their text
/// does and `/decode` reads back; `/embed_all` and unknown paths are JSON 404s that say why;
/// `/info` has TEI's fields.
#[tokio::test]
async fn tei_tokenize_decode_info_and_clear_404s() {
    let server = start(candle()).await;
    let text = "This is an example sentence";
    let (status, tokens) =
        post(&server.url, "/tokenize", &serde_json::json!({ "inputs": text }).to_string()).await;
    assert_eq!(status, 200, "{tokens}");
    let tokens = tokens[0].as_array().expect("one input's tokens").clone();
    assert_eq!(tokens.len(), 7, "[CLS], five words, [SEP]: {tokens:?}");
    assert_eq!((tokens[0]["text"].as_str(), tokens[0]["special"].as_bool()), (Some("[CLS]"), Some(true)));
    assert_eq!(tokens[1]["text"], "This");
    assert_eq!((tokens[1]["start"].as_u64(), tokens[1]["stop"].as_u64()), (Some(0), Some(4)));
    let ids: Vec<u64> = tokens.iter().map(|t| t["id"].as_u64().expect("id")).collect();
    let (status, by_text) =
        post(&server.url, "/v1/embeddings", &serde_json::json!({ "input": text }).to_string()).await;
    assert_eq!(status, 200);
    let (status, by_ids) =
        post(&server.url, "/v1/embeddings", &serde_json::json!({ "input": ids }).to_string()).await;
    assert_eq!(status, 200, "{by_ids}");
    assert_eq!(by_ids["data"][0]["embedding"], by_text["data"][0]["embedding"], "ids embed as their text");
    let (status, decoded) =
        post(&server.url, "/decode", &serde_json::json!({ "ids": ids }).to_string()).await;
    assert_eq!(status, 200, "{decoded}");
    assert_eq!(decoded, serde_json::json!(["this is an example sentence"]));
    let (status, body) = post(&server.url, "/decode", r#"{"ids": [999999]}"#).await;
    assert_eq!(status, 422);
    assert!(
        error_message(&body).contains("token id 999999 is not in the model's vocabulary of 30522"),
        "{body}"
    );
    let (status, body) = post(&server.url, "/embed_all", r#"{"inputs": "a"}"#).await;
    assert_eq!((status, body["error"]["type"].as_str()), (404, Some("not_found")), "{body}");
    assert!(error_message(&body).contains("/embed_all (one vector per token) is not served"), "{body}");
    let (status, body) = post(&server.url, "/v3/embed", "{}").await;
    assert_eq!(status, 404);
    // The list is the OpenAPI document's: every route by method.
    let message = error_message(&body);
    let listed =
        message.strip_prefix("no route POST /v3/embed; the routes: POST ").expect("a list of routes");
    let (posts, gets) = listed.split_once("; GET ").expect("the POST routes, then the GET routes");
    assert!(posts.contains("/v1/embeddings") && posts.contains("/v1/chat/completions"), "{body}");
    assert!(gets.contains("/v1/models") && gets.contains("/openapi.json"), "{body}");
    // A route asked with a method it does not take answers JSON too; both carry a request id
    // and are counted (a path no route has under one label).
    let wrong = client().get(format!("{}/v1/embeddings", server.url)).send().await.expect("GET");
    assert_eq!(wrong.status(), 405);
    assert!(wrong.headers().contains_key("x-request-id"));
    let body: serde_json::Value = wrong.json().await.expect("JSON");
    assert_eq!(error_message(&body), "/v1/embeddings does not take GET; it takes POST", "{body}");
    assert_eq!(body["error"]["type"], "method_not_allowed", "{body}");
    // The probes too, uncounted.
    let wrong = client().put(format!("{}/health", server.url)).send().await.expect("PUT");
    assert_eq!(wrong.status(), 405);
    let body: serde_json::Value = wrong.json().await.expect("JSON");
    assert_eq!(error_message(&body), "/health does not take PUT; it takes GET", "{body}");
    let wrong =
        client().delete(format!("{}/v1/models/all-MiniLM-L6-v2", server.url)).send().await.expect("DELETE");
    let body: serde_json::Value = wrong.json().await.expect("JSON");
    assert_eq!(
        error_message(&body),
        "/v1/models/all-MiniLM-L6-v2 does not take DELETE; it takes GET",
        "{body}"
    );
    let metrics = client().get(format!("{}/metrics", server.url)).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains(r#"route="unmatched",status="404""#), "{metrics}");
    assert!(metrics.contains(r#"route="/v1/embeddings",status="405""#), "{metrics}");
    let info: serde_json::Value =
        client().get(format!("{}/info", server.url)).send().await.unwrap().json().await.unwrap();
    assert_eq!(info["model_id"], "all-MiniLM-L6-v2");
    assert_eq!(info["model_type"]["embedding"]["pooling"], "mean", "{info}");
    assert_eq!(info["max_client_batch_size"], 4);
    server.stop().await;
}
