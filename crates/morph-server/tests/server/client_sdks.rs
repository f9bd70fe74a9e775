//! The real clients against real servers: the official `openai` Python SDK and
//! `langchain-openai` (installed from PyPI by `.ci/run`) run `clients/openai_clients.py`
//! against an embedding server (ONNX Runtime, all-MiniLM-L6-v2) and a generation server
//! (SmolLM2 on llama.cpp, served under another name and an alias), and Hugging Face's
//! `huggingface_hub.InferenceClient` and LangChain's `HuggingFaceEndpointEmbeddings` run
//! `clients/hf_clients.py` against the embedding server at TEI's routes; the `openai` npm
//! package (installed by `npm ci`) runs `clients/node/openai_node.mjs` against both. Every
//! check there asserts an answer's content.

use crate::common;

use common::{decoder, ort, run_client, start};
use morph_server::Deployment;

/// The served name of the decoder (`--served-model-name`), and another name it answers to (a
/// framework's default model name).
const GENERATE_MODEL: &str = "smollm2";
const ALIAS: &str = "gpt-4o-mini";

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
        served_model_names: vec![GENERATE_MODEL.into(), ALIAS.into()],
        ..decoder("fcfs", serde_json::json!({}))
    })
    .await;
    let args = [&embed.url, "all-MiniLM-L6-v2", &generate.url, GENERATE_MODEL, ALIAS].map(String::from);
    run_client("openai_clients.py", args.to_vec(), "pip install openai langchain-openai").await;
    run_client("hf_clients.py", vec![embed.url.clone()], "pip install huggingface_hub langchain-huggingface")
        .await;
    let args = [&embed.url, "all-MiniLM-L6-v2", &generate.url, GENERATE_MODEL].map(String::from);
    run_client(
        "node/openai_node.mjs",
        args.to_vec(),
        "npm ci --prefix crates/morph-server/tests/clients/node",
    )
    .await;
    embed.stop().await;
    generate.stop().await;
}
