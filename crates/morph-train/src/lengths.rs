//! Recording the served decoder's own output lengths for ShareGPT prompts (`morph train
//! lengths`): one round per conversation (a hash of its id picks which), its earlier turns and
//! prompt in the chat template, answered by the decoder greedily in a continuous batch; each
//! answer's length is appended to a JSONL file as it finishes, so an interrupted run resumes
//! where it stopped.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use morph_decoder::{
    DecoderThread, Decoding, FinishReason, GenEvent, GenRequest, IterationReport, LoadedDecoder, Message,
    SamplingParams, StepperShape,
};

use crate::predictor::dataset::{LengthRecord, Rounds, load_length_records, load_sharegpt};

/// What a run answers and where it writes.
#[derive(Debug, Clone)]
pub struct LengthsRun {
    /// ShareGPT conversations (JSONL: id, turns).
    pub sharegpt: PathBuf,
    /// How many conversations to answer, in file order, after passing over `skip`.
    pub conversations: usize,
    pub skip: usize,
    pub rounds: Rounds,
    /// Prompts are cut to this many tokens by dropping their oldest turns; a round whose own
    /// prompt is longer is skipped.
    pub max_context: usize,
    /// Answers are cut at this many tokens (recorded with finish "length").
    pub max_tokens: u32,
    /// Generations running at once.
    pub batch: usize,
    /// The JSONL file the lengths are appended to (conversations already in it are skipped).
    pub out: PathBuf,
}

struct Pending {
    conversation: String,
    round: u32,
    first_turn: u32,
    prompt: Vec<u32>,
}

/// Answers `run`'s rounds on `decoder` and appends each answer's length to `run.out`.
pub fn record_lengths(decoder: &LoadedDecoder, run: &LengthsRun) -> anyhow::Result<()> {
    let conversations = load_sharegpt(&run.sharegpt)?;
    let done: HashSet<String> = match run.out.exists() {
        true => load_length_records(&run.out)?.into_iter().map(|r| r.conversation).collect(),
        false => HashSet::new(),
    };
    let tokenizer = &decoder.model.tokenizer;
    let mut pending = Vec::new();
    let (mut skipped, mut unrepresentable) = (0, 0);
    for c in conversations
        .iter()
        .skip(run.skip)
        .take(run.conversations)
        .filter(|c| run.rounds.includes(&c.id) && !done.contains(&c.id))
    {
        let round = c.sampled_round();
        let Some((history, prompt)) = c.round(round) else { continue };
        match fitted_prompt(history, prompt, run.max_context, |messages| {
            Ok(tokenizer.encode(&tokenizer.chat_prompt(messages, &[])?)?)
        }) {
            Ok(Some((first_turn, ids))) => {
                pending.push(Pending { conversation: c.id.clone(), round, first_turn, prompt: ids })
            }
            Ok(None) => skipped += 1,
            Err(e) if matches!(e.downcast_ref(), Some(morph_engine::EngineError::Unrepresentable(_))) => {
                unrepresentable += 1
            }
            Err(e) => return Err(e),
        }
    }
    println!(
        "{} rounds to answer ({} already recorded, {skipped} longer than {} tokens and {unrepresentable} with characters the vocabulary lacks skipped)",
        pending.len(),
        done.len(),
        run.max_context
    );

    let mut out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&run.out)
        .with_context(|| format!("opening {}", run.out.display()))?;
    let (finished_tx, finished_rx) = std::sync::mpsc::channel();
    let hook = Box::new(move |report: IterationReport| {
        let _ = finished_tx.send(report);
    });
    let batch = run.batch.max(1);
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let shape = StepperShape::new(batch, run.max_context + run.max_tokens as usize, threads);
    let worker = DecoderThread::spawn("lengths".into(), decoder.clone(), shape, 0, hook)?;
    let mut queue = pending.into_iter().enumerate();
    let mut running = HashMap::new();
    let (started, mut answered, mut tokens) = (Instant::now(), 0usize, 0usize);
    // The worker waits for its next step after each report that leaves generations.
    let mut holding = false;
    loop {
        let mut joining = Vec::new();
        while running.len() + joining.len() < batch {
            let Some((key, p)) = queue.next() else { break };
            let (events, rx) = tokio::sync::mpsc::unbounded_channel();
            let sampling = SamplingParams::default();
            joining.push(GenRequest {
                key: key as u64,
                prompt: p.prompt.clone(),
                max_tokens: run.max_tokens,
                decoding: Decoding { sampling, ..Decoding::default() },
                events,
            });
            running.insert(key as u64, (p, rx));
        }
        let joined = !joining.is_empty();
        if joined {
            worker.join(joining)?;
        }
        if holding || joined {
            worker.step_every()?;
        }
        if running.is_empty() {
            break;
        }
        let report = finished_rx.recv().context("the decoder stopped")?;
        holding = !report.empty;
        for key in report.left {
            let (p, mut rx) = running.remove(&key).context("a generation finished twice")?;
            let (reason, completion) = loop {
                match rx.try_recv().context("a finished generation sent no Done")? {
                    GenEvent::Done { reason, completion_tokens, .. } => break (reason, completion_tokens),
                    GenEvent::Failed(e) => return Err(e.into()),
                    _ => {}
                }
            };
            let record = LengthRecord {
                conversation: p.conversation,
                round: p.round,
                first_turn: p.first_turn,
                prompt_tokens: p.prompt.len() as u32,
                output_len: completion as u32,
                finish: if reason == FinishReason::Stop { "stop" } else { "length" }.into(),
            };
            writeln!(out, "{}", serde_json::to_string(&record)?)?;
            (answered, tokens) = (answered + 1, tokens + completion);
            if answered % 20 == 0 {
                let secs = started.elapsed().as_secs_f64();
                println!(
                    "{answered} answered, {tokens} tokens in {secs:.0} s ({:.1} tokens/s)",
                    tokens as f64 / secs
                );
            }
        }
    }
    println!("wrote {answered} lengths to {}", run.out.display());
    Ok(())
}

/// The chat prompt's token ids for `history` then `prompt`, dropping the oldest
/// prompt-and-response pairs until it fits `max_context` (with the first turn kept); None if the
/// prompt alone does not fit.
fn fitted_prompt(
    history: &[Message],
    prompt: &str,
    max_context: usize,
    encode: impl Fn(&[Message]) -> anyhow::Result<Vec<u32>>,
) -> anyhow::Result<Option<(u32, Vec<u32>)>> {
    for start in (0..=history.len()).step_by(2) {
        let mut messages = history[start..].to_vec();
        messages.push(Message::new("user", prompt));
        let ids = encode(&messages)?;
        if ids.len() <= max_context {
            return Ok(Some((start as u32, ids)));
        }
    }
    Ok(None)
}
