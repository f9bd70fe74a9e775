//! Replicas as `morph worker` processes, end to end: all-MiniLM-L6-v2 cut into 3 stages, each
//! stage a worker process, answers the unsplit server's vectors; a worker killed mid-batch
//! (SIGKILL) is replaced warm from the host cache and its batch
//! runs again there, every call answered once and right; a worker that stops answering is
//! declared dead after the batch timeout, killed and replaced the same way; QUART sizes live
//! stage workers; a host cache over its budget evicts and launches still succeed; a worker in
//! another network namespace serves over TCP; readiness is 503 while every worker is dead;
//! threads and worker processes serve the same vectors at int8 and at fp32. SmolLM2's prefill in 5 stage worker processes
//! answers the whole model's greedy next token, and a killed stage comes back warm.

use crate::common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;

use morph_core::{ModelId, RuntimeSpec, StageSpec, TokenPlan, UnitSpec};
use morph_encoder::pooling::cosine;
use morph_encoder::{OrtEncoder, Pooling};
use morph_engine::Engine;
use morph_fetch::onnxruntime_library;
use morph_fetch::{ModelSource, Pip, fetch, morph_home};
use morph_worker::remote::{Endpoint, Listener, RemoteEngine};
use serde_json::{Value, json};

#[tokio::test]
async fn stage_workers_give_the_unsplit_vectors_and_a_killed_one_comes_back_warm_and_reruns_its_batch() {
    // fp32 as the worker processes run (in threads the default is int8 graphs).
    let whole = serve(&["--stages", "1", "--workers", "thread", "--dtype", "fp32"]);
    let (status, body) = embed(&whole.url, &TEXTS).await;
    assert_eq!(status, 200, "{body}");
    let expected = vectors(&body);
    drop(whole);

    let split = serve(&["--stages", "3", "--workers", "process", "--dtype", "fp32"]);
    let (status, body) = embed(&split.url, &TEXTS).await;
    assert_eq!(status, 200, "{body}");
    for (a, b) in vectors(&body).iter().zip(&expected) {
        assert!(cosine(a, b) >= 0.99999, "3 worker processes vs whole: cosine {}", cosine(a, b));
    }
    let before = workers(&split.url).await;
    assert_eq!(before.len(), 3, "{before:?}");
    assert!(
        before.iter().all(|w| w.2 == "cold"),
        "the first replica of each stage starts from disk: {before:?}"
    );
    let (stage1, victim, _, _) = before[1].clone();
    assert!(stage1.contains("stage1of3"), "{stage1}");

    // 120 calls in flight, then the middle stage's worker is killed under them.
    let calls: Vec<_> = (0..120)
        .map(|i| {
            let url = split.url.clone();
            tokio::spawn(async move {
                let text = format!("call {i} {}", "about workers ".repeat(i % 20));
                embed(&url, &[text.as_str()]).await
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    signal(victim, "KILL");
    for call in calls {
        let (status, body) = call.await.expect("every call is answered");
        assert_eq!(status, 200, "the killed worker's batch runs again on its replacement: {body}");
        assert_eq!(vectors(&body).len(), 1);
    }
    assert_eq!(metric(&split.url, "morph_workers_lost_total").await, 1.0);
    assert_eq!(metric(&split.url, "morph_request_failures_total{kind=\"engine\"}").await, 0.0);

    until("the replacement worker", async || workers(&split.url).await.len() == 3).await;
    let after = workers(&split.url).await;
    let replaced = after.iter().find(|w| w.0 == stage1).expect("stage 1 is back");
    assert_ne!(replaced.1, victim, "a new process");
    assert_eq!(replaced.2, "warm", "its prepared graphs were in the host cache: {after:?}");
    let (status, body) = embed(&split.url, &TEXTS).await;
    assert_eq!(status, 200, "{body}");
    for (a, b) in vectors(&body).iter().zip(&expected) {
        assert!(cosine(a, b) >= 0.99999, "through the warm-started stage: cosine {}", cosine(a, b));
    }
    let info = get_json(&split.url, "/info").await;
    let cached = info["workers"]["host_cache"]["artefacts"].as_array().expect("artefacts").len();
    assert_eq!(cached, 3, "one prepared artefact per stage: {info}");
}

/// One dtype everywhere: a server hands its worker processes its dtype, so the same request gets
/// the same vector from threads and from worker processes (whole models, and two stages), at
/// int8 (the default) and at fp32; and the two dtypes' vectors differ, so the check could fail.
/// In each, a short text gets the same vector alone and batched beside longer texts.
#[tokio::test]
async fn threads_and_worker_processes_serve_the_same_vectors_in_each_dtype() {
    let mut whole = Vec::new();
    for dtype in ["int8", "fp32"] {
        for stages in ["1", "2"] {
            let mut answers = Vec::new();
            for workers in ["thread", "process"] {
                let served = serve(&["--dtype", dtype, "--stages", stages, "--workers", workers]);
                let info = get_json(&served.url, "/info").await;
                assert_eq!(info["model_dtype"], if dtype == "int8" { "int8" } else { "float32" }, "{info}");
                let (status, body) = embed(&served.url, &TEXTS).await;
                assert_eq!(status, 200, "{body}");
                answers.push(vectors(&body));
                let (_, alone) = embed(&served.url, &["ok"]).await;
                let (_, beside) = embed(&served.url, &[TEXTS[1], "ok", TEXTS[2]]).await;
                let c = cosine(&vectors(&alone)[0], &vectors(&beside)[1]);
                assert!(
                    c >= 0.99999,
                    "{dtype}, {stages} stage(s), {workers}: \"ok\" alone and beside longer texts, cosine {c}"
                );
            }
            for (a, b) in answers[0].iter().zip(&answers[1]) {
                let c = cosine(a, b);
                assert!(c >= 0.99999, "{dtype}, {stages} stage(s): threads against processes, cosine {c}");
            }
            if stages == "1" {
                whole.push(answers.remove(0));
            }
        }
    }
    let least = whole[0].iter().zip(&whole[1]).map(|(a, b)| cosine(a, b)).fold(1.0, f32::min);
    assert!(least < 0.99999, "int8 and fp32 vectors differ (least cosine {least})");
}

async fn ready(url: &str) -> u16 {
    reqwest::get(format!("{url}/ready")).await.expect("GET /ready").status().as_u16()
}

/// Readiness follows the workers: 503 once the only worker is killed (its exit seen in the
/// process table, with no call to find it), 200 again once the policy replaced it (cold: no
/// host cache, no parked worker), and the replacement serves.
#[tokio::test]
async fn readiness_goes_503_when_every_worker_is_dead_and_back_when_one_is_replaced() {
    let served = serve(&["--workers", "process", "--host-cache-mb", "0", "--parked", "0"]);
    assert_eq!(ready(&served.url).await, 200);
    let (_, victim, _, _) = workers(&served.url).await[0].clone();
    signal(victim, "KILL");
    until("readiness to say 503", async || ready(&served.url).await == 503).await;
    until("readiness to come back", async || ready(&served.url).await == 200).await;
    let after = workers(&served.url).await;
    assert!(after.len() == 1 && after[0].1 != victim, "a new worker: {after:?}");
    assert_eq!(metric(&served.url, "morph_workers_lost_total").await, 1.0);
    let (status, body) = embed(&served.url, &TEXTS).await;
    assert_eq!(status, 200, "{body}");
    let live = reqwest::get(format!("{}/live", served.url)).await.expect("GET /live");
    assert_eq!(live.status().as_u16(), 200);
}

#[tokio::test]
async fn a_worker_that_stops_answering_is_declared_dead_after_the_batch_timeout() {
    let served = serve(&["--stages", "3", "--workers", "process", "--worker-batch-timeout-s", "1"]);
    let (status, _) = embed(&served.url, &TEXTS).await;
    assert_eq!(status, 200);
    let last = workers(&served.url).await[2].clone();
    signal(last.1, "STOP");
    let (status, body) = embed(&served.url, &TEXTS).await;
    assert_eq!(status, 200, "the batch runs again on the replacement: {body}");
    assert_eq!(metric(&served.url, "morph_workers_lost_total").await, 1.0);
    until("the replacement worker", async || {
        workers(&served.url).await.iter().any(|w| w.0 == last.0 && w.1 != last.1)
    })
    .await;
    assert!(!std::path::Path::new(&format!("/proc/{}", last.1)).exists(), "the silent worker was killed");
    let (status, body) = embed(&served.url, &TEXTS).await;
    assert_eq!(status, 200, "{body}");
}

#[test]
fn a_worker_in_another_network_namespace_serves_a_stage_over_tcp() {
    let files = fetch(&ModelSource::Default, &morph_home()).expect("the default model");
    let library = onnxruntime_library(None, &morph_home(), &Pip::from_env()).expect("ONNX Runtime");
    let stage = UnitSpec::batch(RuntimeSpec::dynamic(64, 2)).with_stage(StageSpec::even(ModelId(0), 1, 3, 6));
    let hidden = vec![vec![0.25f32; 5 * 384], vec![-0.5f32; 3 * 384]];
    let local = OrtEncoder::load(&files, Pooling::Mean, &library).expect("encoder");
    let expected = local
        .instance(stage, &[TokenPlan::Plain])
        .expect("stage")
        .run(morph_engine::BatchInput::Hidden(&hidden), TokenPlan::Plain)
        .expect("local run");

    let name = format!("morphw{}", std::process::id() % 100_000);
    let (host, peer) = ("10.231.7.1", "10.231.7.2");
    let netns = Netns::new(&name, host, peer);
    let listener = Listener::bind(&format!("tcp:{host}:0").parse::<Endpoint>().expect("endpoint"))
        .expect("listen on the veth");
    let endpoint = listener.endpoint().expect("endpoint");
    let child = Command::new("ip")
        .args(["netns", "exec", &netns.name, env!("CARGO_BIN_EXE_morph"), "worker"])
        .arg(format!("--connect={endpoint}"))
        .arg("--model")
        .arg(&files.dir)
        .arg("--ort-library")
        .arg(&library)
        .arg(format!("--unit={}", serde_json::to_string(&stage).expect("unit")))
        .arg("--dtype=fp32")
        .stdout(Stdio::null())
        .spawn()
        .expect("a worker in the namespace");
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let mut remote = RemoteEngine::accept(
        &listener,
        Some(Box::new(child)),
        stage.runtime,
        deadline,
        Duration::from_secs(60),
        None,
    )
    .expect("the worker connects across the namespaces");
    assert_ne!(remote.pid(), std::process::id());
    let got = remote.run(morph_engine::BatchInput::Hidden(&hidden), TokenPlan::Plain).expect("remote run");
    assert_eq!(got.len(), expected.len());
    for (a, b) in got.iter().zip(&expected) {
        assert_eq!(a.len(), b.len());
        let worst = a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
        assert!(worst < 1e-5, "the stage's hidden states over TCP match the local run: {worst}");
    }
    drop(remote);
}

#[tokio::test]
async fn quart_sizes_live_stage_workers_and_adds_replicas_warm_under_load() {
    let flags = ["--stages", "3", "--workers", "process", "--policy", "quart", "--slo-ms", "40"];
    let served = serve(&[&flags[..], &["--instances", "6", "--stage-profile-len", "32"]].concat());
    let info = get_json(&served.url, "/info").await;
    assert_eq!(info["policy"]["policy"], "quart", "{info}");
    assert_eq!(
        info["policy"]["stage_times"].as_array().map(Vec::len),
        Some(3),
        "the stage times measured at start-up"
    );
    assert_eq!(workers(&served.url).await.len(), 3, "one replica per stage to start");
    // The controller splits the SLO over the stages at its first step after start.
    until("the SLO split over the three stages", async || {
        let mut split = true;
        for stage in 0..3 {
            let series = format!("morph_policy_stage_target_delay_seconds{{stage=\"{stage}\"}}");
            split &= metric_if_shown(&served.url, &series).await.is_some_and(|s| s > 0.0);
        }
        split
    })
    .await;
    // Waves of 64 concurrent calls until QUART has added a replica (at most ~30 s).
    let mut waves = 0;
    while metric(&served.url, "morph_instance_starts_total{kind=\"warm\"}").await < 1.0 {
        waves += 1;
        assert!(waves <= 60, "no replica was added under load");
        let calls: Vec<_> = (0..64)
            .map(|i| {
                let url = served.url.clone();
                tokio::spawn(async move { embed(&url, &[format!("wave call {i}").as_str()]).await })
            })
            .collect();
        for call in calls {
            let (status, body) = call.await.expect("answered");
            assert_eq!(status, 200, "{body}");
        }
    }
    let after = workers(&served.url).await;
    assert!(after.len() > 3, "{after:?}");
    assert!(
        after.iter().filter(|w| w.2 == "warm").count() >= 1,
        "added replicas start from the host cache: {after:?}"
    );
    assert_eq!(metric(&served.url, "morph_policy_refusals_total").await, 0.0);
}

#[tokio::test]
async fn a_host_cache_over_its_budget_evicts_and_every_launch_still_succeeds() {
    // 20 MiB: stage 0's artefact (~60 MB, the embeddings) is never kept; stages 1 and 2 (~14 MB
    // each in fp32) start at once, and whichever is admitted second pushes the cache over 85% and
    // evicts the other.
    let served =
        serve(&["--stages", "3", "--workers", "process", "--host-cache-mb", "20", "--dtype", "fp32"]);
    let (status, body) = embed(&served.url, &TEXTS).await;
    assert_eq!(status, 200, "{body}");
    let cache = get_json(&served.url, "/info").await["workers"]["host_cache"].clone();
    assert!(cache["bytes"].as_f64().expect("bytes") <= 0.85 * 20.0 * 1048576.0, "{cache}");
    assert_eq!(cache["evictions"], 1, "{cache}");
    let kept: Vec<&str> =
        cache["artefacts"].as_array().expect("artefacts").iter().filter_map(|a| a["key"].as_str()).collect();
    assert_eq!(kept.len(), 1, "{cache}");
    assert!(kept[0].contains("stage1of3") || kept[0].contains("stage2of3"), "{cache}");

    let first = workers(&served.url).await[0].clone();
    signal(first.1, "KILL");
    let (status, body) = embed(&served.url, &TEXTS).await;
    assert_eq!(status, 200, "{body}");
    until("the replacement worker", async || {
        workers(&served.url).await.iter().any(|w| w.0 == first.0 && w.1 != first.1)
    })
    .await;
    let replaced = workers(&served.url).await.into_iter().find(|w| w.0 == first.0).expect("stage 0");
    assert_eq!(replaced.2, "cold", "stage 0 was never cached, so its replacement starts from disk");
}

/// A completion of one token (greedy) from a prefill server: its status and text.
async fn next_token(url: &str, prompt: &str) -> (u16, String) {
    let response = reqwest::Client::new()
        .post(format!("{url}/v1/completions"))
        .json(&json!({ "prompt": prompt, "max_tokens": 1, "temperature": 0 }))
        .timeout(Duration::from_secs(120))
        .send()
        .await
        .expect("an answer");
    let status = response.status().as_u16();
    let body: Value = response.json().await.expect("JSON body");
    (status, body["choices"][0]["text"].as_str().map_or_else(|| body.to_string(), str::to_string))
}

#[tokio::test]
async fn decoder_stage_workers_give_the_whole_models_next_token_and_a_killed_one_comes_back_warm() {
    use morph_decoder::Llama;
    use morph_fetch::fetch_default_decoder;

    const PROMPT: &str = "The capital of France is";
    let gguf = fetch_default_decoder(&morph_home(), &Pip::from_env()).expect("SmolLM2");
    let expected = {
        let morph_decoder::DecoderModel { llama, tokenizer } = Llama::load(&gguf).expect("the whole model");
        let prompt = tokenizer.encode(PROMPT).expect("tokens");
        let logits = llama.step(&mut [(&prompt, &mut llama.new_cache())]).expect("prefill").remove(0);
        let best = logits.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|(i, _)| i as u32);
        tokenizer.decode(&[best.expect("logits")]).expect("text")
    };
    let served = serve_with(&["--task", "generate", "--stages", "5", "--workers", "process"]);
    assert_eq!(next_token(&served.url, PROMPT).await, (200, expected.clone()));
    let before = workers(&served.url).await;
    assert_eq!(before.len(), 5, "{before:?}");
    assert!(before.iter().all(|w| w.2 == "cold"), "{before:?}");
    let (stage2, victim, _, _) = before[2].clone();
    assert!(stage2.contains("stage2of5"), "{stage2}");

    let calls: Vec<_> = (0..12)
        .map(|_| {
            let url = served.url.clone();
            tokio::spawn(async move { next_token(&url, PROMPT).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    signal(victim, "KILL");
    // A call after the kill finds the worker gone, whether or not the ones in flight did.
    let mut answers = vec![next_token(&served.url, PROMPT).await];
    for call in calls {
        answers.push(call.await.expect("every call is answered"));
    }
    for answer in answers {
        assert_eq!(answer, (200, expected.clone()), "the killed stage's requests rerun on its replacement");
    }
    assert_eq!(metric(&served.url, "morph_workers_lost_total").await, 1.0);
    until("the replacement worker", async || workers(&served.url).await.len() == 5).await;
    let after = workers(&served.url).await;
    let replaced = after.iter().find(|w| w.0 == stage2).expect("stage 2 is back");
    assert_ne!(replaced.1, victim, "a new process");
    assert_eq!(replaced.2, "warm", "its f32 tensors were in the host cache: {after:?}");
}

/// The server's resident memory in MiB.
fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
    line.split_whitespace().nth(1).and_then(|kb| kb.parse::<f64>().ok()).expect("kB") / 1024.0
}

/// One call of 32 inputs of 512 tokens used to leave the ONNX Runtime server 1.2 GB larger for
/// good (its CPU arena kept what the run took); such a batch now gives it back. The model is
/// the default one without its sentence-transformers config, whose 256 tokens would refuse
/// the inputs: its positions take 512.
#[tokio::test]
async fn a_large_call_gives_its_memory_back() {
    let default = fetch(&ModelSource::Default, &morph_home()).expect("the default model");
    let model = tempfile::tempdir().expect("a model directory");
    for file in [&default.config, &default.weights, &default.tokenizer] {
        let name = file.file_name().expect("a file name");
        std::fs::hard_link(file, model.path().join(name))
            .or_else(|_| std::fs::copy(file, model.path().join(name)).map(|_| ()))
            .expect("the model's files");
    }
    let dir = model.path().to_str().expect("a UTF-8 path");
    let served = serve_with(&["--engine", "ort", "--runtime", "dynamic:512x32", "--model", dir]);
    let (status, body) = embed(&served.url, &["warm up"]).await;
    assert_eq!(status, 200, "{body}");
    let before = rss_mib(served.child.id());
    let long = "the quick brown fox jumps over the lazy dog ".repeat(56);
    let (status, body) = embed(&served.url, &vec![long.as_str(); 32]).await;
    assert_eq!(status, 200, "{body}");
    let after = rss_mib(served.child.id());
    assert!(after - before < 300.0, "{before:.0} MiB before, {after:.0} MiB after the call");
}
