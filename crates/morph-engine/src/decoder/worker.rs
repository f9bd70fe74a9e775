//! A decoder instance on its own OS thread, running a continuous batch: generations join
//! between iterations ([`DecoderWorker::join`]); every iteration runs one [`Llama::step`] over
//! all of them, samples each one's next token and streams it to its caller; a generation
//! leaves at its end-of-sequence token or at `max_tokens`. After every iteration the worker
//! reports which generations finished (the driver's `SequencesDone`).

use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;

use super::gguf_tokenizer::GgufTokenizer;
use super::llama::{Llama, SequenceCache};
use super::sampling::{Sampler, SamplingParams};
use crate::EngineError;

/// Why a generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// The model produced its end-of-sequence token.
    Stop,
    /// `max_tokens` were produced.
    Length,
}

/// What a generation's caller receives, in order: its tokens as they are sampled, then one
/// `Done` or `Failed`.
#[derive(Debug, Clone, PartialEq)]
pub enum GenEvent {
    /// A token and the text it adds (empty while it completes only part of a character).
    Token {
        id: u32,
        text: String,
    },
    Done {
        reason: FinishReason,
        prompt_tokens: usize,
        completion_tokens: usize,
    },
    Failed(EngineError),
    /// The scheduler refused it before it ran (the driver sends this, not the worker).
    Rejected(morph_core::RejectReason),
}

/// One generation handed to the worker.
#[derive(Debug)]
pub struct GenRequest {
    /// The caller's key for it, reported back when it finishes.
    pub key: u64,
    pub prompt: Vec<u32>,
    pub max_tokens: u32,
    pub sampling: SamplingParams,
    pub events: tokio::sync::mpsc::UnboundedSender<GenEvent>,
}

/// Called after every iteration with the keys of the generations that finished in it and
/// whether the batch is now empty.
pub type IterationHook = Box<dyn FnMut(Vec<u64>, bool) + Send>;

/// An [`IterationHook`]'s reports, as a driver receives them: (finished keys, batch empty).
pub type Iterations = tokio::sync::mpsc::UnboundedReceiver<(Vec<u64>, bool)>;

enum Command {
    Join(Vec<GenRequest>),
    Stop,
}

/// Handle to the worker thread; dropping it stops the thread (running generations fail).
#[derive(Debug)]
pub struct DecoderWorker {
    tx: Sender<Command>,
    thread: Option<JoinHandle<()>>,
}

struct Running {
    request: GenRequest,
    cache: SequenceCache,
    feed: Vec<u32>,
    produced: Vec<u32>,
    text: TextStream,
    sampler: Sampler,
}

/// Turns a growing token list into text pieces, decoding only a short window each time: the
/// tokens since the last piece that ended on a whole character (`prefix..`), against the same
/// window without the new tokens (`prefix..read`).
#[derive(Debug, Default)]
struct TextStream {
    prefix: usize,
    read: usize,
}

impl TextStream {
    /// The text `tokens` adds since the last call; empty while it ends inside a character.
    fn next(&mut self, tokenizer: &GgufTokenizer, tokens: &[u32]) -> String {
        let before = tokenizer.decode(&tokens[self.prefix..self.read]).unwrap_or_default();
        let now = tokenizer.decode(&tokens[self.prefix..]).unwrap_or_default();
        match now.get(before.len()..) {
            Some(fresh) if !now.ends_with('\u{FFFD}') && now.len() > before.len() => {
                let fresh = fresh.to_string();
                (self.prefix, self.read) = (self.read, tokens.len());
                fresh
            }
            _ => String::new(),
        }
    }
}

impl DecoderWorker {
    pub fn spawn(
        name: String,
        model: Arc<(Llama, GgufTokenizer)>,
        on_iteration: IterationHook,
    ) -> std::io::Result<Self> {
        let (tx, rx) = channel();
        let thread = std::thread::Builder::new().name(name).spawn(move || run(&model, &rx, on_iteration))?;
        Ok(Self { tx, thread: Some(thread) })
    }

    /// Adds generations to the batch; they start at the next iteration.
    pub fn join(&self, requests: Vec<GenRequest>) -> Result<(), EngineError> {
        self.tx.send(Command::Join(requests)).map_err(|_| EngineError::Stopped)
    }
}

impl Drop for DecoderWorker {
    fn drop(&mut self) {
        let _ = self.tx.send(Command::Stop);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(model: &(Llama, GgufTokenizer), rx: &Receiver<Command>, mut on_iteration: IterationHook) {
    let (llama, tokenizer) = model;
    let mut running: Vec<Running> = Vec::new();
    loop {
        // Block while idle; between iterations take whatever joined without waiting.
        let command = if running.is_empty() { rx.recv().ok() } else { rx.try_recv().ok() };
        match command {
            Some(Command::Stop) => break,
            Some(Command::Join(requests)) => {
                running.extend(requests.into_iter().map(|request| Running {
                    cache: llama.new_cache(),
                    feed: request.prompt.clone(),
                    produced: Vec::new(),
                    text: TextStream::default(),
                    sampler: Sampler::new(request.sampling),
                    request,
                }));
                continue;
            }
            None if running.is_empty() => break,
            None => {}
        }
        let finished = iterate(llama, tokenizer, &mut running);
        on_iteration(finished, running.is_empty());
    }
    for r in running {
        let _ = r.request.events.send(GenEvent::Failed(EngineError::Stopped));
    }
}

/// One step over every running generation; returns the keys of those that finished.
fn iterate(llama: &Llama, tokenizer: &GgufTokenizer, running: &mut Vec<Running>) -> Vec<u64> {
    let stepped = {
        let mut batch: Vec<(&[u32], &mut SequenceCache)> =
            running.iter_mut().map(|r| (r.feed.as_slice(), &mut r.cache)).collect();
        llama.step(&mut batch)
    };
    let logits = match stepped {
        Ok(logits) => logits,
        Err(e) => {
            return running
                .drain(..)
                .map(|r| {
                    let _ = r.request.events.send(GenEvent::Failed(e.clone()));
                    r.request.key
                })
                .collect();
        }
    };
    let mut finished = Vec::new();
    let mut kept = Vec::with_capacity(running.len());
    for (mut r, row) in running.drain(..).zip(logits) {
        let next = r.sampler.sample(&row);
        let reason = if next == tokenizer.eos {
            Some(FinishReason::Stop)
        } else {
            r.produced.push(next);
            let fresh = r.text.next(tokenizer, &r.produced);
            let _ = r.request.events.send(GenEvent::Token { id: next, text: fresh });
            (r.produced.len() >= r.request.max_tokens as usize).then_some(FinishReason::Length)
        };
        match reason {
            Some(reason) => {
                let done = GenEvent::Done {
                    reason,
                    prompt_tokens: r.request.prompt.len(),
                    completion_tokens: r.produced.len(),
                };
                let _ = r.request.events.send(done);
                finished.push(r.request.key);
            }
            None => {
                r.feed = vec![next];
                kept.push(r);
            }
        }
    }
    *running = kept;
    finished
}
