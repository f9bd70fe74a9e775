//! A second decoder family served end to end: a Qwen2-architecture GGUF (random weights in
//! Qwen2's layout, with biases on q/k/v; Qwen's vocabulary and Qwen2.5's chat
//! template, both from llama.cpp's test data fetched by Morph into `MORPH_HOME`). Its chat
//! prompt is rendered by the template in its metadata, tokenized by Qwen's pre-tokenizer, and its
//! greedy reply over HTTP equals llama.cpp's own greedy decoding of that prompt, run directly.

use crate::common;

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::{Content, Value, write};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use rand::{Rng, SeedableRng};
use serde_json::{Value as Json, json};

use common::serve_with;
use morph_fetch::{Pip, fetch_llama_cpp_vocabularies, morph_home};

const QUESTION: &str = "What is the capital of France?";
/// Qwen2.5's template with no system message: its own, then the turn, then the reply's start.
const RENDERED: &str = "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n";
const MAX_TOKENS: usize = 12;

/// Shape of the random model: Qwen2's layout, tiny.
const HIDDEN: usize = 64;
const FFN: usize = 128;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
const LAYERS: usize = 2;

/// Writes the Qwen2 GGUF into `dir` (the same bytes every run: a seeded generator), with Qwen2.5's
/// chat template or none.
fn write_qwen2(dir: &Path, with_template: bool) -> PathBuf {
    let vocab_dir =
        fetch_llama_cpp_vocabularies(&morph_home(), &Pip::from_env()).expect("llama.cpp's vocabularies");
    let vocab =
        Content::read(&mut std::fs::File::open(vocab_dir.join("ggml-vocab-qwen2.gguf")).expect("vocab"))
            .expect("its metadata");
    let template = std::fs::read_to_string(vocab_dir.join("templates/Qwen-Qwen2.5-7B-Instruct.jinja"))
        .expect("template");
    let tokens = vocab.metadata["tokenizer.ggml.tokens"].to_vec().expect("tokens").len();

    let u32v = |v: usize| Value::U32(v as u32);
    let mut metadata: Vec<(String, Value)> = vec![
        ("general.architecture".into(), Value::String("qwen2".into())),
        ("general.name".into(), Value::String("random-qwen2".into())),
        ("qwen2.block_count".into(), u32v(LAYERS)),
        ("qwen2.context_length".into(), u32v(2048)),
        ("qwen2.embedding_length".into(), u32v(HIDDEN)),
        ("qwen2.feed_forward_length".into(), u32v(FFN)),
        ("qwen2.attention.head_count".into(), u32v(HEADS)),
        ("qwen2.attention.head_count_kv".into(), u32v(KV_HEADS)),
        ("qwen2.rope.freq_base".into(), Value::F32(1_000_000.0)),
        ("qwen2.attention.layer_norm_rms_epsilon".into(), Value::F32(1e-6)),
    ];
    if with_template {
        metadata.push(("tokenizer.chat_template".into(), Value::String(template)));
    }
    metadata.extend(
        vocab
            .metadata
            .iter()
            .filter(|(k, _)| k.starts_with("tokenizer.ggml."))
            .map(|(k, v)| (k.clone(), v.clone())),
    );

    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    // Uniform values of standard deviation `std`.
    let mut tensor = |shape: &[usize], std: f32, dtype: GgmlDType| {
        let half_width = std * 3f32.sqrt();
        let values: Vec<f32> =
            (0..shape.iter().product()).map(|_| rng.random_range(-half_width..half_width)).collect();
        let t = Tensor::from_vec(values, shape, &Device::Cpu).expect("tensor");
        QTensor::quantize(&t, dtype).expect("quantize")
    };
    let ones = |n: usize| {
        let t = Tensor::ones(n, candle_core::DType::F32, &Device::Cpu).expect("ones");
        QTensor::quantize(&t, GgmlDType::F32).expect("a norm's weights")
    };
    let head_dim = HIDDEN / HEADS;
    let mut tensors: Vec<(String, QTensor)> = vec![
        ("token_embd.weight".into(), tensor(&[tokens, HIDDEN], 0.5, GgmlDType::F16)),
        // A wide head of its own: logits far apart (greedy meets no near tie), and not the
        // embeddings' (a tied random head repeats one token).
        ("output.weight".into(), tensor(&[tokens, HIDDEN], 0.5, GgmlDType::F16)),
        ("output_norm.weight".into(), ones(HIDDEN)),
    ];
    for layer in 0..LAYERS {
        let name = |part: &str| format!("blk.{layer}.{part}");
        let kv = KV_HEADS * head_dim;
        tensors.extend([
            (name("attn_norm.weight"), ones(HIDDEN)),
            (name("attn_q.weight"), tensor(&[HIDDEN, HIDDEN], 0.3, GgmlDType::F32)),
            (name("attn_q.bias"), tensor(&[HIDDEN], 0.3, GgmlDType::F32)),
            (name("attn_k.weight"), tensor(&[kv, HIDDEN], 0.3, GgmlDType::F32)),
            (name("attn_k.bias"), tensor(&[kv], 0.3, GgmlDType::F32)),
            (name("attn_v.weight"), tensor(&[kv, HIDDEN], 0.3, GgmlDType::F32)),
            (name("attn_v.bias"), tensor(&[kv], 0.3, GgmlDType::F32)),
            (name("attn_output.weight"), tensor(&[HIDDEN, HIDDEN], 0.3, GgmlDType::F32)),
            (name("ffn_norm.weight"), ones(HIDDEN)),
            (name("ffn_gate.weight"), tensor(&[FFN, HIDDEN], 0.3, GgmlDType::F32)),
            (name("ffn_up.weight"), tensor(&[FFN, HIDDEN], 0.3, GgmlDType::F32)),
            (name("ffn_down.weight"), tensor(&[HIDDEN, FFN], 0.3, GgmlDType::F32)),
        ]);
    }
    let path = dir.join("random-qwen2.gguf");
    let metadata: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    write(&mut std::fs::File::create(&path).expect("create"), &metadata, &tensors).expect("write the GGUF");
    path
}

/// llama.cpp alone: `prompt`'s tokens (Qwen's tokenizer) and its greedy continuation (until an
/// end of generation or `n` tokens), as text.
fn llama_cpp_greedy(gguf: &Path, prompt: &str, n: usize) -> (usize, String) {
    // llama.cpp's state is once per process: the decoder's, which the served tests share.
    let backend = morph_decoder::llama_backend().expect("llama.cpp");
    let model = LlamaModel::load_from_file(backend, gguf, &LlamaModelParams::default()).expect("load");
    let params = LlamaContextParams::default().with_n_ctx(NonZeroU32::new(512));
    let mut ctx = model.new_context(backend, params).expect("context");
    let vocab = model.vocab();
    let prompt = vocab.tokenize(prompt.as_bytes(), false, true);
    let mut batch = LlamaBatch::new(512, 1);
    for (i, &token) in prompt.iter().enumerate() {
        batch.add(token, i as i32, &[0], i + 1 == prompt.len()).expect("batch");
    }
    let mut sampler = LlamaSampler::greedy();
    let (mut text, mut position) = (Vec::new(), prompt.len() as i32);
    for _ in 0..n {
        ctx.decode(&mut batch).expect("decode");
        let next: LlamaToken = sampler.sample(&ctx, batch.n_tokens() - 1);
        if vocab.is_eog(next) {
            break;
        }
        vocab.token_to_piece_into(next, &mut text, false, None);
        batch.clear();
        batch.add(next, position, &[0], true).expect("batch");
        position += 1;
    }
    (prompt.len(), String::from_utf8_lossy(&text).into_owned())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_qwen2_gguf_is_served_by_its_own_template_tokenizer_and_kernels() {
    let dir = tempfile::tempdir().expect("temp dir");
    let gguf = write_qwen2(dir.path(), true);
    let (prompt_tokens, expected) = llama_cpp_greedy(&gguf, RENDERED, MAX_TOKENS);
    assert!(!expected.is_empty(), "the reference generates something");

    let model = gguf.to_str().expect("utf-8 path");
    let served = serve_with(&["--task", "generate", "--model", model]);
    let response = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", served.url))
        .json(&json!({
            "model": "random-qwen2",
            "messages": [{"role": "user", "content": QUESTION}],
            "temperature": 0,
            "max_tokens": MAX_TOKENS,
        }))
        .send()
        .await
        .expect("an answer");
    let status = response.status();
    let body: Json = response.json().await.expect("JSON");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["usage"]["prompt_tokens"], prompt_tokens, "the template's prompt, Qwen's tokens: {body}");
    assert_eq!(body["choices"][0]["message"]["content"], expected, "llama.cpp's own greedy reply: {body}");
}

/// Without a chat template a chat call is refused, naming what is missing (a completion is
/// served; `--chat-template` gives it one), and candle's kernels, Llama-only, refuse the
/// architecture in one line.
#[tokio::test(flavor = "multi_thread")]
async fn a_gguf_without_a_template_serves_completions_and_candle_refuses_qwen2() {
    let dir = tempfile::tempdir().expect("temp dir");
    let gguf = write_qwen2(dir.path(), false);
    let model = gguf.to_str().expect("utf-8 path");

    let candle = std::process::Command::new(env!("CARGO_BIN_EXE_morph"))
        .args(["serve", "--port", "0", "--task", "generate", "--model", model, "--decoder-kernels", "candle"])
        .output()
        .expect("morph serve");
    let stderr = String::from_utf8_lossy(&candle.stderr);
    assert!(!candle.status.success(), "{stderr}");
    assert!(stderr.contains("runs the llama architecture only, and this GGUF is qwen2"), "{stderr}");

    let served = serve_with(&["--task", "generate", "--model", model]);
    let client = reqwest::Client::new();
    let call = |path: &str, body: Json| client.post(format!("{}{path}", served.url)).json(&body).send();
    let chat = call("/v1/chat/completions", json!({"messages": [{"role": "user", "content": QUESTION}]}))
        .await
        .expect("an answer");
    assert_eq!(chat.status(), 422, "a validation error, as every refused field is");
    let body: Json = chat.json().await.expect("JSON");
    assert!(body.to_string().contains("no chat template (tokenizer.chat_template)"), "{body}");
    let completion =
        call("/v1/completions", json!({"prompt": QUESTION, "max_tokens": 4})).await.expect("an answer");
    assert_eq!(completion.status(), 200);
    drop(served);

    // --chat-template gives it one: the same prompt as the template in the metadata renders.
    let template = fetch_llama_cpp_vocabularies(&morph_home(), &Pip::from_env())
        .expect("llama.cpp's vocabularies")
        .join("templates/Qwen-Qwen2.5-7B-Instruct.jinja");
    let template = template.to_str().expect("utf-8 path");
    let served = serve_with(&["--task", "generate", "--model", model, "--chat-template", template]);
    let chat = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", served.url))
        .json(&json!({"messages": [{"role": "user", "content": QUESTION}], "max_tokens": 2}))
        .send()
        .await
        .expect("an answer");
    assert_eq!(chat.status(), 200);
    let body: Json = chat.json().await.expect("JSON");
    let (prompt_tokens, _) = llama_cpp_greedy(&gguf, RENDERED, 0);
    assert_eq!(body["usage"]["prompt_tokens"], prompt_tokens, "{body}");
}
