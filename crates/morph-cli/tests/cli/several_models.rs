//! Several models in one server (`morph serve --config FILE`): the default embedder, a
//! cross-encoder and the default decoder from one deployment file, on the host's two cores.
//! Calls reach the model they name, or the one model of their route's kind (the openai SDK,
//! LangChain, Cohere's SDK, LiteLLM and llama-index among the callers, `clients/app_clients.py`);
//! `/v1/models`, `/ready`, `/info`, `/metrics` (promtool reads the exposition) and `/openapi.json`
//! (schemathesis holds the server to it) speak for every model; and when one model is flooded and
//! then another, each one's cores (`morph_model_threads`) rise while it is flooded and come back
//! after, every call answered.

use crate::common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Served, get_json, post, python_client, serve_with, tiny, until};
use serde_json::{Value, json};

/// The three models, the reranker at `reranker`.
fn deployment(reranker: &std::path::Path) -> String {
    format!(
        r#"
cores = 2
[[models]]
served_model_name = ["minilm", "text-embedding-3-small"]
slo_ms = 100
[[models]]
model = "{}"
served_model_name = ["reranker"]
[[models]]
task = "generate"
served_model_name = ["smollm2"]
max_queue = 64
"#,
        reranker.display()
    )
}

/// Each model's `morph_model_threads` in one scrape.
async fn threads(url: &str) -> Vec<(String, f64)> {
    let text = reqwest::get(format!("{url}/metrics")).await.expect("metrics").text().await.expect("text");
    text.lines()
        .filter_map(|l| l.strip_prefix("morph_model_threads{model=\""))
        .filter_map(|l| {
            let (model, value) = l.split_once("\"} ")?;
            Some((model.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// Floods `model` with `calls` (each a `(path, body)`), 8 at a time, while scraping every model's
/// threads; every call must be answered 200. The most cores each model held meanwhile.
async fn flood(url: &str, calls: Vec<(&'static str, Value)>) -> Vec<(String, f64)> {
    let (done_tx, mut done_rx) = tokio::sync::watch::channel(false);
    let scraper = {
        let url = url.to_string();
        tokio::spawn(async move {
            let mut most: Vec<(String, f64)> = Vec::new();
            while !*done_rx.borrow_and_update() {
                for (model, value) in threads(&url).await {
                    match most.iter_mut().find(|(m, _)| *m == model) {
                        Some((_, top)) => *top = top.max(value),
                        None => most.push((model, value)),
                    }
                }
                let _ = tokio::time::timeout(Duration::from_millis(100), done_rx.changed()).await;
            }
            most
        })
    };
    let queue = std::sync::Arc::new(tokio::sync::Mutex::new(calls));
    let senders: Vec<_> = (0..8)
        .map(|_| {
            let (url, queue) = (url.to_string(), queue.clone());
            tokio::spawn(async move {
                loop {
                    let Some((path, body)) = queue.lock().await.pop() else { return };
                    let (status, answer) = post(&url, path, body).await;
                    assert_eq!(status, 200, "{path}: {answer}");
                }
            })
        })
        .collect();
    for sender in senders {
        sender.await.expect("a sender");
    }
    // The controller's period (250 ms) after the last call: its share of cores is counted.
    tokio::time::sleep(Duration::from_millis(600)).await;
    done_tx.send(true).expect("the scraper");
    scraper.await.expect("the scraper")
}

fn most_of(most: &[(String, f64)], model: &str) -> f64 {
    most.iter().find(|(m, _)| m == model).map_or(0.0, |(_, v)| *v)
}

/// Waits until `model`'s threads read 0 again.
async fn comes_back(url: &str, model: &str) {
    until(&format!("{model}'s cores to come back"), async || {
        threads(url).await.iter().any(|(m, v)| m == model && *v == 0.0)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_models_share_the_cores_by_load_and_each_call_reaches_its_model() {
    let dir = tempfile::tempdir().expect("tempdir");
    let reranker = dir.path().join("reranker");
    std::fs::create_dir(&reranker).expect("a folder");
    tiny::bert_cross_encoder(&reranker);
    let file = dir.path().join("app.toml");
    std::fs::write(&file, deployment(&reranker)).expect("the deployment file");
    let served: Served = serve_with(&["--config", file.to_str().expect("a path")]);
    let url = served.url.as_str();

    // Every model under each of its names.
    let listed = get_json(url, "/v1/models").await;
    let ids: Vec<&str> =
        listed["data"].as_array().expect("data").iter().map(|m| m["id"].as_str().expect("id")).collect();
    assert_eq!(ids, ["minilm", "text-embedding-3-small", "reranker", "smollm2"]);
    // A route of the front asked with a method it does not take answers JSON, as a model's do.
    let (status, wrong) = post(url, "/v1/models", json!({})).await;
    assert_eq!((status, wrong["error"]["type"].as_str()), (405, Some("method_not_allowed")), "{wrong}");
    assert_eq!(wrong["error"]["message"], "/v1/models does not take POST; it takes GET", "{wrong}");

    // A call reaches the model it names, or the one model of its route's kind.
    let (status, embedded) =
        post(url, "/v1/embeddings", json!({"input": "a panda", "model": "text-embedding-3-small"})).await;
    assert_eq!(status, 200, "{embedded}");
    assert_eq!(embedded["model"], "minilm");
    assert_eq!(embedded["data"][0]["embedding"].as_array().expect("a vector").len(), 384);
    let rerank =
        json!({"query": "what is a panda?", "texts": ["The giant panda is a bear.", "Paris is in France."]});
    let (status, ranked) = post(url, "/rerank", rerank.clone()).await;
    assert_eq!((status, ranked.as_array().map(Vec::len)), (200, Some(2)), "{ranked}");
    let chat = json!({"model": "smollm2", "messages": [{"role": "user", "content": "What is 2 + 2?"}],
                      "max_tokens": 8, "temperature": 0});
    let (status, answer) = post(url, "/v1/chat/completions", chat).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["model"], "smollm2");
    // TEI's routes take `model` too, to choose; the model then answers as it would alone.
    let (status, wrong) = post(url, "/embed", json!({"inputs": "hi", "model": "reranker"})).await;
    assert_eq!((status, wrong["error"]["type"].as_str()), (404, Some("wrong_endpoint")), "{wrong}");
    let (status, unknown) = post(url, "/v1/embeddings", json!({"input": "hi", "model": "gpt-4"})).await;
    assert_eq!(status, 404);
    assert!(
        unknown["error"]["message"].as_str().expect("a message").contains("'reranker' or 'smollm2'"),
        "{unknown}"
    );

    // The clients an application uses, on one URL: openai and LangChain embed and chat, Cohere reranks.
    let needs = "pip install openai langchain-openai cohere litellm llama-index-postprocessor-cohere-rerank";
    python_client("app_clients.py", &[url, "text-embedding-3-small", "reranker", "smollm2"], needs).await;

    // Readiness and information per model.
    let ready = get_json(url, "/ready").await;
    assert_eq!(ready["status"], "ok", "{ready}");
    assert_eq!(ready["models"]["smollm2"]["status"], "ok", "{ready}");
    assert_eq!(get_json(url, "/ready?model=reranker").await["status"], "ok");
    let info = get_json(url, "/info").await;
    let kinds: Vec<&str> = info["models"]
        .as_array()
        .expect("models")
        .iter()
        .map(|m| m["kind"].as_str().expect("kind"))
        .collect();
    assert_eq!(kinds, ["embedding", "reranker", "generation"]);
    assert_eq!(info["cores"], 2);

    // TEI's `POST /`, answered by the model named, is counted under its own route.
    let (status, vectors) = post(url, "/", json!({"inputs": "hi", "model": "minilm"})).await;
    assert_eq!(status, 200, "{vectors}");

    // The exposition, every model's series labelled with its name, reads as Prometheus reads it.
    let exposition =
        reqwest::get(format!("{url}/metrics")).await.expect("metrics").text().await.expect("text");
    for series in [
        "morph_requests_total{model=\"reranker\",route=\"/rerank\",status=\"200\"} 1",
        "morph_requests_total{model=\"minilm\",route=\"/\",status=\"200\"} 1",
        // A call no model took (it named none served here) is the server's own.
        "morph_requests_total{route=\"/v1/embeddings\",status=\"404\"} 1",
    ] {
        assert!(exposition.contains(series), "{series} in\n{exposition}");
    }
    let path = dir.path().join("metrics.txt");
    std::fs::write(&path, &exposition).expect("the exposition");
    let checked = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(&path).expect("the exposition"))
        .stderr(Stdio::piped())
        .output()
        .expect("promtool runs (Debian: apt-get install prometheus, as .ci/run does)");
    assert!(checked.status.success(), "{}", String::from_utf8_lossy(&checked.stderr));

    // The API's document states what any model takes and `model` on every route, with every
    // name; `?model=NAME` is one model's own. Schemathesis holds the server to it (every check but
    // "allowed is answered", which one model may refuse of another's values; the generation
    // routes are held to their document on a generation server of their own).
    let document = get_json(url, "/openapi.json").await;
    let body = |path: &str| {
        document["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"].clone()
    };
    assert_eq!(body("/embed")["properties"]["model"]["enum"], json!(ids), "{}", body("/embed"));
    let predict =
        |document: &Value| document["components"]["schemas"]["PredictRequest"]["properties"].clone();
    assert!(predict(&document)["task"].is_object(), "the embedder's task heads read `task`");
    let reranker_own = get_json(url, "/openapi.json?model=reranker").await;
    assert!(predict(&reranker_own)["task"].is_null(), "{}", predict(&reranker_own));
    let checks = "not_a_server_error,status_code_conformance,content_type_conformance,\
                  response_schema_conformance,negative_data_rejection";
    let generation = "^/v1/(chat/)?completions$|^/v1/responses$";
    // The script is morph-server's, which runs it against one model's servers.
    let script = "../../../morph-server/tests/clients/openapi_conformance.py";
    python_client(script, &[url, checks, "5", generation], "pip install schemathesis").await;

    // Flood the embedder, then the decoder: the flooded model's cores rise and come back.
    let long = "The quick brown fox jumps over the lazy dog while the markets rally on news. ".repeat(6);
    let embeds = (0..160)
        .map(|_| ("/v1/embeddings", json!({"input": vec![long.as_str(); 8], "model": "minilm"})))
        .collect();
    let most = flood(url, embeds).await;
    assert!(most_of(&most, "minilm") > 0.25, "the embedder's cores did not rise: {most:?}");
    assert!(most_of(&most, "minilm") > most_of(&most, "smollm2"), "{most:?}");
    comes_back(url, "minilm").await;
    let chats = (0..12)
        .map(|i| {
            let content = format!("Write a short story about the number {i}.");
            let body = json!({"model": "smollm2", "messages": [{"role": "user", "content": content}],
                              "max_tokens": 48, "temperature": 0});
            ("/v1/chat/completions", body)
        })
        .collect();
    let most = flood(url, chats).await;
    assert!(most_of(&most, "smollm2") > 0.25, "the decoder's cores did not rise: {most:?}");
    assert!(most_of(&most, "smollm2") > most_of(&most, "minilm"), "{most:?}");
    comes_back(url, "smollm2").await;
}
