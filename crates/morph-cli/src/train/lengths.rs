//! `morph train lengths`: one round per ShareGPT conversation (a hash of its id picks which),
//! its earlier turns and prompt in the chat template, answered by the decoder greedily in a
//! continuous batch; each answer's length is appended to a JSONL file as it finishes, so an
//! interrupted run resumes where it stopped.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use morph_decoder::{
    DecoderKernels, DecoderThread, Decoding, FinishReason, GenEvent, GenRequest, IterationReport, Message,
    SamplingParams, StepperShape, load_decoder,
};
use morph_train::predictor::{dataset::LengthRecord, dataset::load_length_records, dataset::load_sharegpt};

use crate::model_args::ModelArgs;
use crate::rounds_arg::Rounds;

#[derive(Debug, Args)]
pub(crate) struct LengthsArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// ShareGPT conversations (JSONL: id, turns), e.g. ../shared/data/conversations/sharegpt.jsonl.
    #[arg(long)]
    sharegpt: PathBuf,
    /// How many conversations to answer, in file order.
    #[arg(long, default_value_t = 800)]
    conversations: usize,
    /// Conversations to pass over first (several runs can share a file's conversations out).
    #[arg(long, default_value_t = 0)]
    skip: usize,
    /// Which of those conversations to answer: all, only the held-out ones (validation and
    /// test splits), which is what `morph bench --endpoint chat` sends by default, or only the
    /// training split.
    #[arg(long, value_enum, default_value = "all")]
    rounds: Rounds,
    /// Prompts are cut to this many decoder tokens by dropping their oldest turns; a round
    /// whose own prompt is longer is skipped.
    #[arg(long, default_value_t = 1024)]
    max_context: usize,
    /// Answers are cut at this many tokens (recorded with finish "length").
    #[arg(long, default_value_t = 512)]
    max_tokens: u32,
    /// Generations running at once.
    #[arg(long, default_value_t = 16)]
    batch: usize,
    /// What runs the decoder's steps: llama-cpp (the GGUF weights as shipped, as `morph serve
    /// --task generate` runs them) or candle (f32).
    #[arg(long, default_value = "llama-cpp", value_parser = clap::value_parser!(DecoderKernels))]
    decoder_kernels: DecoderKernels,
    /// JSONL file the lengths are appended to (conversations already in it are skipped).
    #[arg(long)]
    out: PathBuf,
}

struct Pending {
    conversation: String,
    round: u32,
    first_turn: u32,
    prompt: Vec<u32>,
}

pub(crate) fn run(args: LengthsArgs) -> anyhow::Result<()> {
    let conversations = load_sharegpt(&args.sharegpt)?;
    let done: HashSet<String> = match args.out.exists() {
        true => load_length_records(&args.out)?.into_iter().map(|r| r.conversation).collect(),
        false => HashSet::new(),
    };
    let decoder = load_decoder(&args.model.fetch_decoder()?, args.decoder_kernels, None)?;
    let tokenizer = &decoder.model.tokenizer;
    let mut pending = Vec::new();
    let (mut skipped, mut unrepresentable) = (0, 0);
    for c in conversations
        .iter()
        .skip(args.skip)
        .take(args.conversations)
        .filter(|c| args.rounds.includes(&c.id) && !done.contains(&c.id))
    {
        let round = c.sampled_round();
        let Some((history, prompt)) = c.round(round) else { continue };
        match fitted_prompt(history, prompt, args.max_context, |messages| {
            Ok(tokenizer.encode(&tokenizer.chat_prompt(messages)?)?)
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
        args.max_context
    );

    let mut out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.out)
        .with_context(|| format!("opening {}", args.out.display()))?;
    let (finished_tx, finished_rx) = std::sync::mpsc::channel();
    let hook = Box::new(move |report: IterationReport| {
        let _ = finished_tx.send(report);
    });
    let batch = args.batch.max(1);
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let shape =
        StepperShape { sequences: batch, seq_tokens: args.max_context + args.max_tokens as usize, threads };
    let worker = DecoderThread::spawn("lengths".into(), decoder.clone(), shape, 0, hook)?;
    let mut queue = pending.into_iter().enumerate();
    let mut running = HashMap::new();
    let (started, mut answered, mut tokens) = (Instant::now(), 0usize, 0usize);
    // The worker holds its next iteration until the last report is answered.
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
                max_tokens: args.max_tokens,
                decoding: Decoding { sampling, ..Decoding::default() },
                events,
            });
            running.insert(key as u64, (p, rx));
        }
        if !joining.is_empty() {
            worker.join(joining)?;
        }
        if holding {
            worker.resume()?;
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
    println!("wrote {answered} lengths to {}", args.out.display());
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
