//! The generation endpoints on SmolLM2 (continuous batching of 2, FCFS): OpenAI formats, greedy
//! answers, streaming equal to the whole reply, concurrent requests answered as if alone, and
//! errors with their status codes.

use crate::common;

use common::{client, decoder, decoder_on, decoder_prefilling, post, start};
use morph_backend::EngineKind;
use morph_backend::engines::DecoderEngine;
use morph_core::RuntimeSpec;
use morph_decoder::{DecoderKernels, PrefillWeights};
use morph_server::Deployment;
use serde_json::json;

fn chat_body(question: &str, max_tokens: u32) -> String {
    json!({"messages": [{"role": "user", "content": question}], "max_tokens": max_tokens, "temperature": 0})
        .to_string()
}

/// A streamed completion's events as sent, and its chunks (the stream ends with `[DONE]`).
async fn streamed_completion(url: &str, body: &serde_json::Value) -> (String, Vec<serde_json::Value>) {
    let text = client()
        .post(format!("{url}/v1/completions"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("a stream")
        .text()
        .await
        .expect("its events");
    let events: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
    assert_eq!(events.last(), Some(&"[DONE]"), "{text}");
    let chunks =
        events[..events.len() - 1].iter().map(|e| serde_json::from_str(e).expect("chunk JSON")).collect();
    (text, chunks)
}

fn content(body: &serde_json::Value) -> String {
    body["choices"][0]["message"]["content"].as_str().expect("content").to_string()
}

/// SmolLM2 in one place (one sequence at a time), with a prompt cache of `cache_bytes`.
fn one_place(cache_bytes: usize) -> Deployment {
    let mut deployment = decoder("fcfs", json!({}));
    let mut engine = deployment.engine.settings::<DecoderEngine>().expect("a decoder").clone();
    engine.prompt_cache.bytes = cache_bytes;
    deployment.engine = EngineKind::new(engine);
    deployment.runtimes = vec![RuntimeSpec::dynamic(2048, 1)];
    deployment
}

/// A conversation's second round, after another conversation took the only place, reuses its
/// first round's prompt up to the reply turn from the prompt cache: `cached_tokens` and
/// /metrics count it, and the answer is the one a server without a cache gives.
#[tokio::test]
async fn a_next_round_reuses_its_first_round_from_the_prompt_cache() {
    let cached = start(one_place(64 << 20)).await;
    let question = json!({"role": "user", "content": "What is 2 + 2?"});
    let round1 = json!({"messages": [question], "max_tokens": 20, "temperature": 0});
    let (status, first) = post(&cached.url, "/v1/chat/completions", &round1.to_string()).await;
    assert_eq!(status, 200, "{first}");
    let (status, other) =
        post(&cached.url, "/v1/chat/completions", &chat_body("Name three colours.", 8)).await;
    assert_eq!(status, 200, "{other}");
    let answer = json!({"role": "assistant", "content": content(&first)});
    let follow = json!({"role": "user", "content": "And 3 + 3?"});
    let round2 = json!({"messages": [question, answer, follow], "max_tokens": 20, "temperature": 0});
    let (status, second) = post(&cached.url, "/v1/chat/completions", &round2.to_string()).await;
    assert_eq!(status, 200, "{second}");
    // Round 1's 38 tokens but its reply turn (`<|im_start|>assistant\n`, 4 tokens).
    assert_eq!(second["usage"]["prompt_tokens_details"]["cached_tokens"], 34, "{second}");
    let metrics = client().get(format!("{}/metrics", cached.url)).send().await.expect("metrics");
    let metrics = metrics.text().await.expect("metrics body");
    assert!(metrics.contains("morph_prompt_cache_hits_total 1\n"), "{metrics}");
    assert!(metrics.contains("morph_prompt_cache_reused_tokens_total 34\n"), "{metrics}");
    assert!(
        metrics.contains("morph_prompt_cache_entries 2\n"),
        "round 2's state serves for round 1's: {metrics}"
    );
    assert!(metrics.contains("morph_prompt_cache_capacity_bytes 67108864\n"), "{metrics}");

    let plain = start(one_place(0)).await;
    let (status, want) = post(&plain.url, "/v1/chat/completions", &round2.to_string()).await;
    assert_eq!(status, 200, "{want}");
    assert_eq!(want["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    assert_eq!(content(&second), content(&want), "the answer computed afresh");
    let metrics = client().get(format!("{}/metrics", plain.url)).send().await.expect("metrics");
    assert!(!metrics.text().await.expect("metrics body").contains("morph_prompt_cache_hits_total"));
}

#[tokio::test]
async fn chat_and_completions_answer_greedily_and_stream_the_same_text() {
    let server = start(decoder("fcfs", json!({}))).await;
    let (status, body) = post(&server.url, "/v1/chat/completions", &chat_body("What is 2 + 2?", 20)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["object"], "chat.completion");
    assert!(content(&body).contains(" 4"), "{body}");
    assert_eq!(body["usage"]["prompt_tokens"], 38);
    assert_eq!(body["usage"]["prompt_tokens_details"]["cached_tokens"], 0, "nothing kept yet");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    // Asked again, the prompt's cache is kept but for its last two tokens (the last alone would
    // run in another kernel than beside the one before it), and the answer is the same.
    let (status, again) = post(&server.url, "/v1/chat/completions", &chat_body("What is 2 + 2?", 20)).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["usage"]["prompt_tokens_details"]["cached_tokens"], 36, "{again}");
    assert_eq!(content(&again), content(&body));
    let metrics = client().get(format!("{}/metrics", server.url)).send().await.expect("metrics");
    let metrics = metrics.text().await.expect("metrics body");
    assert!(metrics.contains("morph_prompt_tokens_total 76\n"), "{metrics}");
    assert!(metrics.contains("morph_prompt_tokens_cached_total 36\n"), "{metrics}");

    let prompt = json!({"prompt": "The capital of France is", "max_tokens": 6, "temperature": 0});
    let (status, whole) = post(&server.url, "/v1/completions", &prompt.to_string()).await;
    assert_eq!(status, 200, "{whole}");
    assert_eq!(whole["choices"][0]["finish_reason"], "length");
    assert_eq!(whole["usage"]["completion_tokens"], 6);
    let mut streamed = prompt.clone();
    streamed["stream"] = json!(true);
    streamed["stream_options"] = json!({"include_usage": true});
    let (text, chunks) = streamed_completion(&server.url, &streamed).await;
    let joined: String = chunks.iter().filter_map(|c| c["choices"][0]["text"].as_str()).collect();
    assert_eq!(joined, whole["choices"][0]["text"].as_str().expect("text"));
    // The choice's last chunk has its finish reason; then, as asked, one with the usage alone.
    let [.., finish, usage] = chunks.as_slice() else { panic!("{text}") };
    assert_eq!(finish["choices"][0]["finish_reason"], "length");
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["completion_tokens"], 6);
    server.stop().await;
}

/// Three chats at once on two slots: the third joins when a slot frees; each gets the reply it
/// gets alone.
#[tokio::test]
async fn concurrent_chats_share_the_continuous_batch_and_answer_as_alone() {
    let server = start(decoder("fcfs", json!({}))).await;
    let questions = ["What is the capital of France?", "Name three colours.", "What is 2 + 2?"];
    let mut alone = Vec::new();
    for q in questions {
        let (status, body) = post(&server.url, "/v1/chat/completions", &chat_body(q, 12)).await;
        assert_eq!(status, 200, "{body}");
        alone.push(content(&body));
    }
    let url = server.url.clone();
    let together = futures_join(questions.map(|q| {
        let url = url.clone();
        async move { post(&url, "/v1/chat/completions", &chat_body(q, 12)).await }
    }))
    .await;
    for ((status, body), want) in together.iter().zip(&alone) {
        assert_eq!(*status, 200, "{body}");
        assert_eq!(&content(body), want);
    }
    server.stop().await;
}

async fn futures_join<F: std::future::Future<Output = T> + Send + 'static, T: Send + 'static>(
    futures: [F; 3],
) -> Vec<T> {
    let handles: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.expect("task"));
    }
    out
}

/// A call of more choices than the queue holds beside the running batch is refused whole before
/// any of it computes, and leaves nothing behind: the next call is served. As no retry could
/// help, it is a 422 naming `n`, on an idle server and on a busy one alike.
#[tokio::test]
async fn a_call_the_queue_cannot_hold_is_refused_whole_and_computes_nothing() {
    let server = start(decoder("fcfs", json!({"max_queue": 2}))).await;
    let body = json!({"prompt": ["Count to three.", "Count to five."], "n": 4, "max_tokens": 4});
    let (status, reply) = post(&server.url, "/v1/completions", &body.to_string()).await;
    // Refused on an idle server, where no retry helps: named by n, not "retry later".
    assert_eq!(status, 422, "{reply}");
    let message = reply["error"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("n: the call's choices, prompts × n = 8, are more"), "{reply}");
    assert!(message.contains("more than this server holds at once"), "{reply}");
    let metrics = common::client().get(format!("{}/metrics", server.url)).send().await.expect("scrape");
    let metrics = metrics.text().await.expect("text");
    // No decoder iteration ran, no token was sampled, no sequence was counted as cancelled.
    for computed in ["morph_decode_iteration_seconds_count", "morph_cancellations_total"] {
        assert!(!metrics.contains(computed), "{computed} after a refused call:\n{metrics}");
    }
    // (The counter appears with the decoder's first report, which may come after this scrape.)
    let sampled = metrics.lines().find_map(|l| l.strip_prefix("morph_generated_tokens_total "));
    assert!(sampled.is_none_or(|n| n == "0"), "{metrics}");
    let body = json!({"prompt": ["Hi", "Bye"], "max_tokens": 4});
    let (status, reply) = post(&server.url, "/v1/completions", &body.to_string()).await;
    assert_eq!(status, 200, "{reply}");
    // Busy with a stream: the same call, larger than the queue and the batch together, is
    // still a 422, not a 429 to retry.
    let stream = json!({"prompt": "Tell a long story.", "max_tokens": 200, "stream": true});
    let mut streaming = common::client()
        .post(format!("{}/v1/completions", server.url))
        .header("content-type", "application/json")
        .body(stream.to_string())
        .send()
        .await
        .expect("a stream");
    streaming.chunk().await.expect("its first chunk").expect("a chunk");
    let big = json!({"prompt": ["Count to three.", "Count to five."], "n": 4, "max_tokens": 4});
    let (status, reply) = post(&server.url, "/v1/completions", &big.to_string()).await;
    assert_eq!(status, 422, "{reply}");
    assert!(reply["error"]["message"].as_str().unwrap_or_default().starts_with("n: "), "{reply}");
    drop(streaming);
    server.stop().await;
}

#[tokio::test]
async fn bad_requests_and_overload_get_clear_errors() {
    let server = start(decoder("fcfs", json!({"max_queue": 0}))).await;
    let cases = [
        ("/v1/chat/completions", json!({"messages": []}), 422, "messages: must not be empty"),
        ("/v1/chat/completions", json!({"messages": [{"role": "user"}]}), 422, "messages[0].content"),
        ("/v1/completions", json!({"prompt": "hi", "max_tokens": 0}), 422, "max_tokens: must be between 1"),
        ("/v1/completions", json!({"prompt": "hi", "max_tokens": 8192}), 422, "max_tokens"),
        // Within the model's context, but not within the 2048 tokens a sequence of the runtime holds.
        (
            "/v1/completions",
            json!({"prompt": "hi", "max_tokens": 2048}),
            422,
            "exceed the 2048 tokens a sequence holds here",
        ),
        ("/v1/completions", json!({"prompt": "hi", "temperature": -1}), 422, "temperature"),
        (
            "/v1/completions",
            json!({"prompt": "a\u{14}b"}),
            422,
            "(U+0014) that this model's vocabulary has no token for",
        ),
        ("/v1/completions", json!({"prompt": "hi", "model": "gpt-4"}), 404, "gpt-4"),
        ("/v1/embeddings", json!({"input": "hi"}), 404, "use /v1/completions"),
        // No queue at all: nothing is ever held, so the call is refused as too large, not 429.
        (
            "/v1/completions",
            json!({"prompt": "hi", "max_tokens": 4}),
            422,
            "prompt: the call's choices, prompts × n = 1",
        ),
    ];
    for (path, body, want, text) in cases {
        let (status, reply) = post(&server.url, path, &body.to_string()).await;
        assert_eq!(status, want, "{path} {body}: {reply}");
        assert!(reply.to_string().contains(text), "{path} {body}: {reply}");
    }
    // The task mismatch has its own type; a prompt longer than the decoder's runtime (2048
    // tokens here, within the model's context of 8192) is refused, not prefilled.
    let (_, reply) = post(&server.url, "/v1/embeddings", &json!({"input": "hi"}).to_string()).await;
    assert_eq!(reply["error"]["type"], "wrong_endpoint", "{reply}");
    let long = json!({"prompt": "hello ".repeat(2500), "max_tokens": 4});
    let (status, reply) = post(&server.url, "/v1/completions", &long.to_string()).await;
    assert_eq!(status, 413, "{reply}");
    assert!(
        reply
            .to_string()
            .contains("the prompt has 2501 tokens, more than the decoder takes (2047: its runtime's length"),
        "{reply}"
    );
    // A prompt that fills the runtime leaves no room for the answer: refused the same way, with
    // max_tokens or without, never an engine failure.
    for limit in [json!(1), json!(null)] {
        let full = json!({"prompt": "hello ".repeat(2047), "max_tokens": limit});
        let (status, reply) = post(&server.url, "/v1/completions", &full.to_string()).await;
        assert_eq!(status, 413, "{reply}");
        assert!(reply.to_string().contains("the prompt has 2048 tokens"), "{reply}");
    }
    server.stop().await;
}

/// Sampling at the default temperature (1): without a seed repeated calls sample afresh; with
/// the same seed they repeat.
#[tokio::test]
async fn without_a_seed_calls_sample_afresh_and_a_seed_repeats() {
    let server = start(decoder("fcfs", json!({}))).await;
    let body = |seed: Option<u64>| {
        let mut b =
            json!({"messages": [{"role": "user", "content": "Tell me about the sea."}], "max_tokens": 24});
        if let Some(seed) = seed {
            b["seed"] = json!(seed);
        }
        b.to_string()
    };
    let mut unseeded = Vec::new();
    for _ in 0..3 {
        let (status, reply) = post(&server.url, "/v1/chat/completions", &body(None)).await;
        assert_eq!(status, 200, "{reply}");
        unseeded.push(content(&reply));
    }
    assert!(unseeded.windows(2).any(|w| w[0] != w[1]), "three unseeded calls gave one text: {unseeded:?}");
    let (_, a) = post(&server.url, "/v1/chat/completions", &body(Some(11))).await;
    let (_, b) = post(&server.url, "/v1/chat/completions", &body(Some(11))).await;
    assert_eq!(content(&a), content(&b), "the same seed samples the same text");
    server.stop().await;
}

/// SmolLM2's prefill in 5 stages of 6 layers, the stages batched by dynamic batching with
/// hidden states handed on: a chat's one-token completion is the whole decoder's first token;
/// more than one token is refused with a clear 422.
#[tokio::test]
async fn a_decoder_cut_into_prefill_stages_answers_the_whole_decoders_first_token() {
    let question = "What is the capital of France?";
    // The stages run candle's f32 path: the whole decoder on the same path is the reference.
    let whole = start(decoder_on(DecoderKernels::Candle, "fcfs", json!({}))).await;
    let (status, expected) = post(&whole.url, "/v1/chat/completions", &chat_body(question, 1)).await;
    assert_eq!(status, 200, "{expected}");
    whole.stop().await;

    let params = json!({"max_batch_tokens": 16_384, "max_queue": 64});
    let staged = start(morph_server::Deployment {
        stages: 5,
        ..decoder_on(DecoderKernels::Candle, "dynamic-batching", params)
    })
    .await;
    let metrics = client().get(format!("{}/metrics", staged.url)).send().await.expect("metrics");
    let metrics = metrics.text().await.expect("metrics body");
    assert!(metrics.contains("stage4of5:L24-30"), "{metrics}");
    let (status, body) = post(&staged.url, "/v1/chat/completions", &chat_body(question, 1)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(content(&body), content(&expected), "{body} vs {expected}");
    assert_eq!(body["usage"], expected["usage"]);
    let (status, body) = post(&staged.url, "/v1/chat/completions", &chat_body(question, 5)).await;
    assert_eq!(status, 422, "{body}");
    assert!(body["error"]["message"].as_str().unwrap_or_default().contains("one token"), "{body}");
    staged.stop().await;
}

/// `logit_bias` moves the draw: +100 all but forces a token, -100 bans the token greedy decoding
/// takes; a bias out of range, a key that is not a token id, or an id past the vocabulary is
/// refused by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_logit_bias_forces_or_bans_a_token() {
    let gguf = morph_fetch::fetch_default_decoder(&morph_fetch::morph_home(), &morph_fetch::Pip::from_env())
        .expect("fetching the default decoder");
    let tokenizer = morph_decoder::GgufTokenizer::load(&gguf).expect("its tokenizer");
    let id = |text: &str| {
        let ids = tokenizer.encode(text).expect("tokenizes");
        let ids = match tokenizer.bos() {
            Some(bos) => ids.strip_prefix(&[bos]).unwrap_or(&ids).to_vec(),
            None => ids,
        };
        assert_eq!(ids.len(), 1, "{text:?} is one token: {ids:?}");
        ids[0]
    };
    let server = start(decoder("fcfs", json!({}))).await;
    let complete = |bias: serde_json::Value| {
        let url = server.url.clone();
        async move {
            let body = json!({"prompt": "The capital of France is", "max_tokens": 3, "temperature": 0,
                "logprobs": 1, "logit_bias": bias});
            post(&url, "/v1/completions", &body.to_string()).await
        }
    };
    let first_token = |answer: &serde_json::Value| {
        answer["choices"][0]["logprobs"]["tokens"][0].as_str().expect("a first token").to_string()
    };
    let (status, free) = complete(json!({})).await;
    assert_eq!(status, 200, "{free}");
    let greedy = first_token(&free);
    let (status, banned) = complete(json!({id(&greedy).to_string(): -100})).await;
    assert_eq!(status, 200, "{banned}");
    assert_ne!(first_token(&banned), greedy, "{free}\n{banned}");
    let (status, forced) = complete(json!({id(",").to_string(): 100})).await;
    assert_eq!(status, 200, "{forced}");
    assert_eq!(forced["choices"][0]["text"], ",,,", "{forced}");
    for (bias, field) in [
        (json!({"x": 1}), "logit_bias.x"),
        (json!({"5": 101}), "logit_bias.5"),
        (json!({"49999999": 1}), "logit_bias.49999999"),
        (json!([1]), "logit_bias"),
    ] {
        let (status, answer) = complete(bias.clone()).await;
        assert_eq!(status, 422, "{bias}: {answer}");
        assert!(
            answer["error"]["message"].as_str().unwrap_or_default().starts_with(field),
            "{bias}: {answer}"
        );
    }
    server.stop().await;
}

/// `echo` with `logprobs` scores a prompt token by token, as lm-evaluation-harness' loglikelihood
/// call asks (token ids, `max_tokens` 1): each token's log-probability is the one the model gives
/// it after the tokens before it (what a generation forced to it by `logit_bias` reports, the
/// reported log-probability being the raw one), the first has none; streamed, the prompt comes
/// first, whole; `max_tokens: 0` scores the prompt only; ids past the vocabulary, and `echo` on
/// chat, are refused by name. A scored prompt runs on the file's weights, as a generation does
/// on a server prefilling on them (`--prefill-weights file`; on an 8-bit copy, a generation's
/// first token is drawn from the copy's logits).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_echoed_prompt_is_scored_as_a_forced_generation_scores_its_tokens() {
    let gguf = morph_fetch::fetch_default_decoder(&morph_fetch::morph_home(), &morph_fetch::Pip::from_env())
        .expect("fetching the default decoder");
    let tokenizer = morph_decoder::GgufTokenizer::load(&gguf).expect("its tokenizer");
    let text = "The capital of France is Paris, and";
    let ids = tokenizer.encode(text).expect("tokenizes");
    // Sequences of 64 tokens: room for every call here, and a prompt that fills one is quick.
    let mut deployment =
        decoder_prefilling(DecoderKernels::LlamaCpp, PrefillWeights::File, "fcfs", json!({}));
    deployment.runtimes = vec![RuntimeSpec::dynamic(64, 2)];
    let server = start(deployment).await;
    let complete = |body: serde_json::Value| {
        let url = server.url.clone();
        async move { post(&url, "/v1/completions", &body.to_string()).await }
    };
    let scoring = json!({"prompt": [ids], "max_tokens": 1, "logprobs": 1, "echo": true, "temperature": 0});
    let (status, scored) = complete(scoring.clone()).await;
    assert_eq!(status, 200, "{scored}");
    let choice = &scored["choices"][0];
    let logprobs = &choice["logprobs"];
    let token_logprobs = logprobs["token_logprobs"].as_array().expect("token_logprobs");
    assert_eq!(token_logprobs.len(), ids.len() + 1, "the prompt's tokens and the one drawn: {scored}");
    assert!(token_logprobs[0].is_null() && logprobs["top_logprobs"][0].is_null(), "{scored}");
    assert!(choice["text"].as_str().expect("text").starts_with(text), "{scored}");
    let tokens: Vec<&str> =
        logprobs["tokens"].as_array().expect("tokens").iter().filter_map(|t| t.as_str()).collect();
    assert_eq!(tokens[..ids.len()].concat(), text, "{scored}");
    // Each prompt token against a generation from the tokens before it, forced to it.
    for k in 1..ids.len() {
        let forced = json!({"prompt": [&ids[..k]], "max_tokens": 1, "logprobs": 1, "temperature": 0,
            "logit_bias": {ids[k].to_string(): 100}});
        let (status, forced) = complete(forced).await;
        assert_eq!(status, 200, "{forced}");
        let want = forced["choices"][0]["logprobs"]["token_logprobs"][0].as_f64().expect("a logprob");
        let got = token_logprobs[k].as_f64().expect("a logprob");
        assert!((got - want).abs() < 1e-3, "token {k} ({:?}): scored {got}, generated {want}", tokens[k]);
    }
    // A drawn end of sequence still closes the list, as the harness reads it (all but the last).
    let ended = json!({"prompt": [ids], "max_tokens": 1, "logprobs": 1, "echo": true,
        "logit_bias": {tokenizer.eos().to_string(): 100}});
    let (status, ended) = complete(ended).await;
    assert_eq!(status, 200, "{ended}");
    assert_eq!(ended["choices"][0]["text"], text, "{ended}");
    assert_eq!(ended["choices"][0]["finish_reason"], "stop", "{ended}");
    let ended_logprobs = ended["choices"][0]["logprobs"]["token_logprobs"].as_array().map(Vec::len);
    assert_eq!(ended_logprobs, Some(ids.len() + 1), "{ended}");
    // Only scored: the prompt and nothing after it.
    let (status, only) =
        complete(json!({"prompt": [ids], "max_tokens": 0, "logprobs": 0, "echo": true})).await;
    assert_eq!(status, 200, "{only}");
    assert_eq!(only["choices"][0]["text"], text, "{only}");
    assert_eq!(only["choices"][0]["logprobs"]["token_logprobs"].as_array().map(Vec::len), Some(ids.len()));
    assert_eq!(
        (only["choices"][0]["finish_reason"].as_str(), only["usage"]["completion_tokens"].as_u64()),
        (Some("length"), Some(0))
    );
    // A prompt that fills the 64 tokens a sequence holds leaves no room for an answer, but one
    // only echoed needs none: it is fed whole.
    for (max_tokens, want) in [(1, 413), (0, 200)] {
        let full = json!({"prompt": "hello ".repeat(63), "max_tokens": max_tokens, "echo": true});
        let (status, reply) = complete(full).await;
        assert_eq!(status, want, "{reply}");
        assert!(want != 200 || reply["usage"]["prompt_tokens"] == 64, "{reply}");
    }
    // Streamed: the echoed prompt first, with its logprobs, then the token.
    let mut stream = scoring;
    stream["stream"] = json!(true);
    let (events, chunks) = streamed_completion(&server.url, &stream).await;
    assert_eq!(chunks[0]["choices"][0]["text"], text, "{events}");
    assert_eq!(
        chunks[0]["choices"][0]["logprobs"]["token_logprobs"].as_array(),
        Some(&token_logprobs[..ids.len()].to_vec()),
        "{events}"
    );
    let streamed: String = chunks.iter().filter_map(|c| c["choices"][0]["text"].as_str()).collect();
    assert_eq!(streamed, choice["text"].as_str().unwrap_or_default(), "{events}");
    // Echoed text without logprobs; refusals.
    let (status, echoed) = complete(json!({"prompt": "Hi", "max_tokens": 2, "echo": true})).await;
    assert_eq!(status, 200, "{echoed}");
    assert!(echoed["choices"][0]["text"].as_str().unwrap_or_default().starts_with("Hi"), "{echoed}");
    for (route, body, field) in [
        ("/v1/completions", json!({"prompt": [[1, 49999999]]}), "prompt: token 49999999 is not a token"),
        ("/v1/completions", json!({"prompt": "Hi", "max_tokens": 0}), "max_tokens: must be between 1"),
        (
            "/v1/chat/completions",
            json!({"messages": [{"role": "user", "content": "Hi"}], "echo": true}),
            "echo: is a field of /v1/completions",
        ),
    ] {
        let (status, answer) = post(&server.url, route, &body.to_string()).await;
        assert_eq!(status, 422, "{body}: {answer}");
        assert!(
            answer["error"]["message"].as_str().unwrap_or_default().starts_with(field),
            "{body}: {answer}"
        );
    }
    server.stop().await;
}
