//! The host-memory prompt cache on real GGUFs of two families, SmolLM2-135M-Instruct (llama,
//! ChatML turns) and Gemma 3 270M (gemma3: sliding-window layers, `<start_of_turn>` turns),
//! both fetched by Morph from PyPI: a conversation's next round, opened on another instance
//! than the one that computed its earlier round, has that round's state restored and continues
//! with the tokens and logits of the round computed afresh, bit for bit; a cache far smaller
//! than the prompts it is given keeps its bound and fails nothing; a worker feeds prompts in
//! pieces per turn or in plain chunks as the reuse rule asks; on Gemma's repacked weights a kept
//! stream reused mid-turn gives the logits computed afresh.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use morph_decoder::sampling::argmax;
use morph_decoder::{
    DecoderKernels, DecoderThread, Decoding, GenRequest, GgufTokenizer, IterationReport, LlamaCppKernels,
    LlamaPromptCache, Message, PrefillWeights, PromptCacheConfig, Reuse, Slot, StepKernels, Stepper,
    StepperShape, load_decoder, pieces,
};
use morph_fetch::{Pip, fetch_default_decoder, fetch_gemma3_270m, morph_home};

/// Tokens each greedy answer runs to at most.
const ANSWER: usize = 12;

/// A decoder loaded twice, prefilling on the same weights: with a prompt cache, and without (the
/// reference).
struct Decoder {
    tokenizer: GgufTokenizer,
    cached: LlamaCppKernels,
    cache: Arc<LlamaPromptCache>,
    plain: LlamaCppKernels,
}

impl Decoder {
    fn load(gguf: &Path, cache_bytes: usize, reuse: Reuse, prefill: PrefillWeights) -> Self {
        let cache = Arc::new(LlamaPromptCache::new(cache_bytes, reuse));
        let load = || LlamaCppKernels::load_prefilling(gguf, prefill).expect("llama.cpp");
        Decoder {
            tokenizer: GgufTokenizer::load(gguf).expect("tokenizer"),
            cached: load().with_prompt_cache(cache.clone()),
            cache,
            plain: load(),
        }
    }

    /// An instance's stepper: up to 2 sequences of 1,024 tokens, 2 threads.
    fn instance<'a>(&self, kernels: &'a LlamaCppKernels) -> Box<dyn Stepper + 'a> {
        kernels.stepper(StepperShape::new(2, 1024, 2)).expect("stepper")
    }

    fn starts(&self, prompt: &[u32]) -> Vec<usize> {
        pieces::turn_starts(prompt, self.tokenizer.turn_start)
    }

    /// Opens `prompt` on `stepper`, feeds its pieces from where the opening left off, one per
    /// step, and answers greedily: the tokens held already, the answer, and every step's logits
    /// from the prompt's last piece on. The sequence is closed after.
    fn answer(&self, stepper: &mut dyn Stepper, prompt: &[u32]) -> (usize, Vec<u32>, Vec<Vec<f32>>) {
        let starts = self.starts(prompt);
        let cut = pieces::Cut { breaks: self.tokenizer.turn_start, chunk: usize::MAX };
        let opened =
            stepper.open(prompt, &starts, cut, prompt.len() + ANSWER).expect("fits").expect("a place");
        let (tokens, logits) = self.greedy(stepper, opened.slot, prompt, opened.cached);
        stepper.close(opened.slot);
        (opened.cached, tokens, logits)
    }

    fn greedy(
        &self,
        stepper: &mut dyn Stepper,
        slot: Slot,
        prompt: &[u32],
        from: usize,
    ) -> (Vec<u32>, Vec<Vec<f32>>) {
        let turn = self.tokenizer.turn_start;
        let mut feeds: Vec<Vec<u32>> =
            pieces::pieces(prompt, from, turn, usize::MAX).into_iter().map(|r| prompt[r].to_vec()).collect();
        let mut feed = feeds.pop().expect("a prompt");
        for piece in feeds {
            stepper.step(&[(slot, &piece)]).expect("step");
        }
        let (mut out, mut steps) = (Vec::new(), Vec::new());
        while out.len() < ANSWER {
            let logits = stepper.step(&[(slot, &feed)]).expect("step").remove(0);
            let next = argmax(&logits);
            steps.push(logits);
            if self.tokenizer.is_end(next) {
                break;
            }
            out.push(next);
            feed = vec![next];
        }
        (out, steps)
    }

    /// Round 1 answered on one instance, round 2 (round 1, its answer, a new question) on
    /// another: round 2 reuses round 1's prompt up to its reply turn from the cache and gives the
    /// tokens and logits of round 2 computed on a decoder without a cache.
    fn check_next_round_restored_exactly(&self, round1: &[u32], follow_up: &str) {
        let mut first = self.instance(&self.cached);
        let (held, answer1, _) = self.answer(first.as_mut(), round1);
        assert_eq!(held, 0, "an empty cache holds nothing");
        assert_eq!(self.cache.stats().entries, 1, "round 1's prompt is kept");
        let follow = self.tokenizer.encode(follow_up).expect("tokenize");
        let follow = follow.strip_prefix(self.tokenizer.bos().as_slice()).unwrap_or(&follow);
        let round2: Vec<u32> = round1.iter().chain(&answer1).chain(follow).copied().collect();

        let mut second = self.instance(&self.cached);
        let (held, answer2, logits2) = self.answer(second.as_mut(), &round2);
        let reply_turn = *self.starts(round1).last().expect("turns");
        assert_eq!(held, reply_turn, "round 1's prompt up to its reply turn, of {} tokens", round2.len());
        let stats = self.cache.stats();
        assert_eq!((stats.hits, stats.tokens_reused), (1, reply_turn as u64), "{stats:?}");

        let mut fresh = self.instance(&self.plain);
        let (held, want_answer, want_logits) = self.answer(fresh.as_mut(), &round2);
        assert_eq!(held, 0);
        assert_eq!(answer2, want_answer, "the same greedy answer");
        assert!(logits2 == want_logits, "the same logits bit for bit");
    }
}

/// SmolLM2 prefilling on its own weights, and on the 8-bit copy of them.
fn smollm2(prefill: PrefillWeights) -> &'static Decoder {
    static FILE: OnceLock<Decoder> = OnceLock::new();
    static COPY: OnceLock<Decoder> = OnceLock::new();
    let decoder = match prefill {
        PrefillWeights::File => &FILE,
        PrefillWeights::Q8_0 => &COPY,
    };
    decoder.get_or_init(|| {
        let gguf = fetch_default_decoder(&morph_home(), &Pip::from_env()).expect("fetching SmolLM2");
        Decoder::load(&gguf, 256 << 20, Reuse::Turns, prefill)
    })
}

#[test]
fn smollm2_next_round_restored_on_another_instance_continues_exactly() {
    next_round_restored_exactly(smollm2(PrefillWeights::File));
}

/// Round 2's reused rows go from the cache into the main context and on to the prefill
/// context, where its new turns run: still the logits of round 2 fed whole, bit for bit.
#[test]
fn smollm2_prefilling_on_the_copy_next_round_restored_continues_exactly() {
    next_round_restored_exactly(smollm2(PrefillWeights::Q8_0));
}

fn next_round_restored_exactly(d: &Decoder) {
    let question = format!("Summarise this: {}", "the river rose and the town moved uphill. ".repeat(10));
    let prompt = d.tokenizer.chat_prompt(&[Message::new("user", &question)], &[]).expect("prompt");
    let round1 = d.tokenizer.encode(&prompt).expect("tokenize");
    d.check_next_round_restored_exactly(
        &round1,
        "<|im_end|>\n<|im_start|>user\nShorter, please.<|im_end|>\n<|im_start|>assistant\n",
    );
}

/// Under [`Reuse::Prefix`] round 2 also reuses round 1's answer (the longest common prefix, in
/// whole blocks, from the cache on another instance), and gives the greedy answer of round 2
/// computed without a cache, its logits within llama.cpp's rounding of those.
#[test]
fn smollm2_prefix_reuse_takes_the_earlier_answer_too() {
    let gguf = fetch_default_decoder(&morph_home(), &Pip::from_env()).expect("fetching SmolLM2");
    let d = Decoder::load(&gguf, 256 << 20, Reuse::Prefix, PrefillWeights::File);
    let question = format!("Summarise this: {}", "the river rose and the town moved uphill. ".repeat(10));
    let prompt = d.tokenizer.chat_prompt(&[Message::new("user", &question)], &[]).expect("prompt");
    let round1 = d.tokenizer.encode(&prompt).expect("tokenize");
    let (_, answer1, _) = d.answer(d.instance(&d.cached).as_mut(), &round1);
    let follow = d
        .tokenizer
        .encode("<|im_end|>\n<|im_start|>user\nShorter, please.<|im_end|>\n<|im_start|>assistant\n");
    let follow = follow.expect("tokenize");
    let round2: Vec<u32> = round1.iter().chain(&answer1).chain(&follow).copied().collect();

    let (held, answer2, logits2) = d.answer(d.instance(&d.cached).as_mut(), &round2);
    assert!(
        held % 16 == 0 && held > round1.len() && held <= round1.len() + answer1.len(),
        "{held} held: round 1's {} prompt tokens and some of its {} answer tokens, in blocks",
        round1.len(),
        answer1.len()
    );
    let (_, want_answer, want_logits) = d.answer(d.instance(&d.plain).as_mut(), &round2);
    assert_eq!(answer2, want_answer, "the same greedy answer");
    let moved = logits2
        .iter()
        .flatten()
        .zip(want_logits.iter().flatten())
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(moved < 1.0, "logits moved by {moved}");
}

/// Gemma's GGUF has no chat template (a base model): its turns are written out.
#[test]
fn gemma3_next_round_restored_on_another_instance_continues_exactly() {
    let gguf = fetch_gemma3_270m(&morph_home(), &Pip::from_env()).expect("fetching Gemma 3 270M");
    let d = Decoder::load(&gguf, 256 << 20, Reuse::Turns, PrefillWeights::File);
    assert!(d.tokenizer.turn_start.is_some(), "<start_of_turn> is a turn start");
    let round1 = d
        .tokenizer
        .encode(&format!(
            "<start_of_turn>user\nList the planets of the solar system, {}<end_of_turn>\n<start_of_turn>model\n",
            "from the nearest to the sun outwards, with one fact each. ".repeat(4)
        ))
        .expect("tokenize");
    d.check_next_round_restored_exactly(
        &round1,
        "<end_of_turn>\n<start_of_turn>user\nNow only the gas giants.<end_of_turn>\n<start_of_turn>model\n",
    );
}

/// Gemma's weights (Q4_K) are repacked by llama.cpp and multiplied four rows at a time beside
/// single rows: a kept stream reused mid-turn (another question's first words) and the same
/// prompt again (all but its last two rows) still give the logits computed afresh, bit for bit.
#[test]
fn gemma3_a_kept_stream_reused_mid_turn_gives_the_fresh_logits() {
    let gguf = fetch_gemma3_270m(&morph_home(), &Pip::from_env()).expect("fetching Gemma 3 270M");
    let d = Decoder::load(&gguf, 0, Reuse::Turns, PrefillWeights::File);
    let turn = |q: &str| {
        let text = format!("<start_of_turn>user\n{q}<end_of_turn>\n<start_of_turn>model\n");
        d.tokenizer.encode(&text).expect("tokenize")
    };
    let (colours, animals) = (turn("Name three colours, please."), turn("Name two animals, please."));
    let common = colours.iter().zip(&animals).take_while(|(a, b)| a == b).count();
    let question = d.starts(&animals)[0];
    assert!(common > question + 2, "the user turn's opening and more: {common} of {}", animals.len());
    let mut kept = d.instance(&d.plain);
    d.answer(kept.as_mut(), &colours);
    for (prompt, want) in [(&animals, common), (&animals, animals.len() - 2)] {
        let (held, answer, logits) = d.answer(kept.as_mut(), prompt);
        assert_eq!(held, want, "of {} tokens", prompt.len());
        let (_, fresh_answer, fresh_logits) = d.answer(d.instance(&d.plain).as_mut(), prompt);
        assert_eq!(answer, fresh_answer);
        assert!(logits == fresh_logits, "the same logits bit for bit");
    }
}

/// A cache with room for two states and twenty distinct conversations: every one is answered,
/// the cache never holds more than its bound, and the ones it evicted are computed afresh.
#[test]
fn a_cache_smaller_than_its_prompts_evicts_and_fails_nothing() {
    let d = smollm2(PrefillWeights::File);
    let chat = |i: usize| {
        let prompt = d
            .tokenizer
            .chat_prompt(&[Message::new("user", &format!("Question {i}: what is {i} times {}?", i + 3))], &[])
            .expect("prompt");
        d.tokenizer.encode(&prompt).expect("tokenize")
    };
    // One state's size, measured: a cache of another decoder fed the first prompt.
    let gguf = fetch_default_decoder(&morph_home(), &Pip::from_env()).expect("fetching SmolLM2");
    let probe = Decoder::load(&gguf, usize::MAX, Reuse::Turns, PrefillWeights::File);
    probe.answer(probe.instance(&probe.cached).as_mut(), &chat(0));
    let state = probe.cache.stats().bytes;
    assert!(state > 0, "a state has a size");

    let small = Decoder::load(&gguf, state * 2 + state / 2, Reuse::Turns, PrefillWeights::File);
    let mut instance = small.instance(&small.cached);
    for i in 0..20 {
        let (_, answer, _) = small.answer(instance.as_mut(), &chat(i));
        assert!(!answer.is_empty(), "conversation {i} answered");
        let stats = small.cache.stats();
        assert!(stats.bytes <= stats.capacity, "after {i}: {stats:?}");
    }
    let stats = small.cache.stats();
    assert!(stats.entries <= 2 && stats.evictions >= 18, "{stats:?}");
}

/// How a worker feeds a chat prompt (system, user and reply turns) under `reuse`, with prompt
/// pieces of at most `chunk` tokens (0: whole): the iterations it took to sample its first
/// token, and the prompt's length.
fn iterations_to_first_token(reuse: Reuse, chunk: usize) -> (usize, usize) {
    let gguf = fetch_default_decoder(&morph_home(), &Pip::from_env()).expect("fetching SmolLM2");
    let loaded = load_decoder(
        &gguf,
        DecoderKernels::LlamaCpp,
        None,
        PromptCacheConfig { bytes: 64 << 20, reuse },
        PrefillWeights::default(),
    )
    .expect("SmolLM2 on llama.cpp");
    let tokenizer = &loaded.model.tokenizer;
    let messages = [Message::new("system", "You answer briefly."), Message::new("user", "Name a colour.")];
    let prompt = tokenizer.encode(&tokenizer.chat_prompt(&messages, &[]).expect("prompt")).expect("tokenize");
    let (report_tx, reports) = std::sync::mpsc::channel();
    let hook = Box::new(move |report: IterationReport| {
        let _ = report_tx.send(report);
    });
    let shape = StepperShape::new(1, 512, 2);
    let worker =
        DecoderThread::spawn("prefix-feeding".into(), loaded.clone(), shape, chunk, hook).expect("worker");
    let (events, _answer) = tokio::sync::mpsc::unbounded_channel();
    let request =
        GenRequest { key: 0, prompt: prompt.clone(), max_tokens: 2, decoding: Decoding::default(), events };
    worker.join(vec![request]).expect("join");
    worker.step_every().expect("step");
    let mut iterations = 0;
    loop {
        let report = reports.recv_timeout(std::time::Duration::from_secs(60)).expect("a report");
        iterations += 1;
        if report.produced > 0 {
            return (iterations, prompt.len());
        }
        assert!(!report.empty && !report.failed, "{report:?}");
        worker.step_every().expect("step");
    }
}

/// Under [`Reuse::Turns`] a prompt is fed a piece per turn (a kept prefix it reuses gives the
/// numbers of the prompt fed so), the reply's opening with the turn before it; under [`Reuse::Prefix`],
/// which reuses any common prefix, it is fed in plain chunks: whole in one iteration, or in
/// ⌈length / 16⌉ pieces of 16.
#[test]
fn prefix_reuse_feeds_a_prompt_in_chunks_rather_than_a_piece_per_turn() {
    let (by_turn, len) = iterations_to_first_token(Reuse::Turns, 0);
    assert_eq!(by_turn, 2, "the system turn, then the user's with the reply's opening: {len} tokens");
    assert_eq!(iterations_to_first_token(Reuse::Prefix, 0), (1, len));
    assert_eq!(iterations_to_first_token(Reuse::Prefix, 16), (len.div_ceil(16), len));
}
