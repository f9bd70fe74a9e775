//! The real clients against real servers: the official `openai` Python SDK and
//! `langchain-openai` (installed from PyPI by `.ci/run`) run `clients/openai_clients.py`
//! against an embedding server (ONNX Runtime, all-MiniLM-L6-v2) and a generation server
//! (SmolLM2 on llama.cpp, served under another name); every check there asserts an answer's
//! content.

mod common;

use std::process::Command;

use common::{decoder, ort, start};
use morph_server::Deployment;

/// The served name of the decoder (`--served-model-name`).
const GENERATE_MODEL: &str = "smollm2";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_sdk_and_langchain_get_what_they_ask_for() {
    // OpenAI's limit per call, in waves the queue holds.
    let embed = Deployment {
        max_client_batch: 2048,
        call_wave: 128,
        policy_params: serde_json::json!({ "max_queue": 256 }),
        ..ort()
    };
    let embed = start(embed).await;
    let generate = start(Deployment {
        served_model_name: Some(GENERATE_MODEL.into()),
        ..decoder("fcfs", serde_json::json!({}))
    })
    .await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/openai_clients.py");
    let args = [script, &embed.url, "all-MiniLM-L6-v2", &generate.url, GENERATE_MODEL].map(String::from);
    let out = tokio::task::spawn_blocking(move || Command::new("python3").args(args).output())
        .await
        .expect("joining the client")
        .expect("python3 runs (the clients need it: pip install openai langchain-openai, as .ci/run does)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the clients failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("all client checks passed"), "{stdout}");
    embed.stop().await;
    generate.stop().await;
}
