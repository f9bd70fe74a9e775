//! A decoder instance on its own OS thread, running its generations by iterations: generations
//! join between iterations ([`DecoderThread::join`]) and start once its [`Stepper`] has a free
//! place (in join order); every iteration runs one [`Stepper::step`] over all of them, samples
//! each one's next token and streams it to its caller; a generation leaves at its
//! end-of-sequence token, at `max_tokens`, at one of its stop strings ([`super::stop`]), or when
//! stopped (its client left).
//! A prompt is fed in [`super::pieces`] of at most `prefill_chunk` tokens, one piece per
//! iteration (chunked prefill), so a long prompt's prefill shares iterations with the others'
//! decode steps instead of holding them all for its whole length; its first token is sampled
//! after its last piece. An instance sharing the host's cores with other models holds them for a
//! whole iteration, so there the iteration's pieces share one chunk (the others' pieces wait for
//! later iterations, decodes always go): a computation of another model waits one chunk at most.
//! The pieces also start at each turn of the chat where the stepper reuses kept prefixes only
//! there ([`Reuse::piece_break`]). Feeding starts where the stepper's kept
//! cache of the prompt ends ([`super::stepper::Opened`]).
//! After every iteration the thread reports which generations left, and while others remain
//! it waits for [`DecoderThread::resume`] before the next (the seam's semantics: the policy
//! answers each report before the next iteration starts).

use std::collections::VecDeque;
use std::sync::mpsc::sync_channel;

use crate::gguf_tokenizer::GgufTokenizer;
use crate::grammar::Grammar;
use crate::load::LoadedDecoder;
use crate::logprobs::{TokenLogprob, token_logprob};
use crate::pieces::{next_piece, turn_starts};
use crate::reuse::Reuse;
use crate::sampling::{Sampler, SamplingParams};
use crate::stepper::{Slot, Stepper, StepperShape};
use crate::stop::{Scanned, StopScan};
use crate::width::Width;
use morph_engine::actor::{Actor, Mail, Mailbox};
use morph_engine::{CoreShare, Cores, EngineError};

/// Why a generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// The model produced its end-of-sequence token, or the text reached a stop string.
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
        /// Its log-probability, when the generation asked for them.
        logprob: Option<TokenLogprob>,
    },
    Done {
        reason: FinishReason,
        /// Text held back while it could have begun a stop string, given out at the end.
        tail: String,
        prompt_tokens: usize,
        /// Of the prompt's tokens, those a closed sequence's kept cache held (not computed again).
        cached_tokens: usize,
        completion_tokens: usize,
    },
    Failed(EngineError),
    /// The scheduler gave up on it before it ran (the driver sends this, not the thread).
    Dropped(morph_core::DropReason),
}

/// How a generation draws its tokens, where it stops, and what it reports of them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decoding {
    pub sampling: SamplingParams,
    /// The generation ends where its text reaches one of these (cut before it).
    pub stop: Vec<String>,
    /// Each token's log-probability with this many of the most likely (`None`: not asked).
    pub logprobs: Option<u8>,
    /// The grammar its text must match (a JSON schema, a tool call), if any.
    pub grammar: Option<Grammar>,
}

/// One generation handed to the thread.
#[derive(Debug)]
pub struct GenRequest {
    /// The caller's key for it, reported back when it finishes.
    pub key: u64,
    pub prompt: Vec<u32>,
    pub max_tokens: u32,
    pub decoding: Decoding,
    pub events: tokio::sync::mpsc::UnboundedSender<GenEvent>,
}

/// What one iteration did: the keys of the generations that left the batch in it (finished,
/// or stopped), and whether the engine failed them all.
#[derive(Debug, Clone, PartialEq)]
pub struct IterationReport {
    pub left: Vec<u64>,
    pub failed: bool,
    /// Tokens sampled in it (one per generation that ran and did not fail).
    pub produced: usize,
    /// No generation remains; otherwise the thread holds the next iteration until resumed.
    pub empty: bool,
    /// The generations it computed, whether any of them fed a prompt chunk, and its wall time
    /// (for the decode cost a simulator prices: K(b) and the prefill).
    pub sequences: usize,
    pub prefilling: bool,
    pub seconds: f64,
    /// Tokens the computed generations' caches hold after it, summed: what their attention
    /// read (a step's cost grows with it as well as with `sequences`).
    pub context: usize,
}

/// Called on the decoder thread after every iteration with its report. A hook that answers
/// at once (the server's driver: its joins, cancels and [`DecoderThread::resume`] sent before
/// it returns) lets the next iteration start without waiting.
pub type IterationHook = Box<dyn FnMut(IterationReport) + Send>;

enum Command {
    Join(Vec<GenRequest>),
    /// The last report was answered: the next iteration may start.
    Resume,
    /// Take this generation out at the end of the current (or next) iteration, unanswered.
    Cancel(u64),
}

/// Handle to the thread; dropping it stops the thread (running generations fail).
#[derive(Debug)]
pub struct DecoderThread {
    actor: Actor<Command>,
}

struct Running {
    request: GenRequest,
    slot: Slot,
    /// What the next iteration feeds: a piece of the prompt, or the last sampled token.
    feed: Vec<u32>,
    /// Prompt tokens fed, `feed` included.
    fed: usize,
    /// Prompt tokens the stepper's kept cache held when it opened.
    cached: usize,
    produced: Vec<u32>,
    text: TextStream,
    stop: StopScan,
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

impl DecoderThread {
    /// A thread running `decoder`'s steps over at most `shape`'s sequences, feeding prompts
    /// `prefill_chunk` tokens per iteration at most (0: whole).
    pub fn spawn(
        name: String,
        decoder: LoadedDecoder,
        shape: StepperShape,
        prefill_chunk: usize,
        on_iteration: IterationHook,
    ) -> Result<Self, EngineError> {
        Self::spawn_sharing(name, decoder, shape, prefill_chunk, on_iteration, None)
    }

    /// As [`Self::spawn`]; with `cores`, each iteration computes only while it holds the
    /// stepper's threads of the host's cores (see [`morph_engine::cores`]).
    pub fn spawn_sharing(
        name: String,
        decoder: LoadedDecoder,
        shape: StepperShape,
        prefill_chunk: usize,
        on_iteration: IterationHook,
        cores: Option<CoreShare>,
    ) -> Result<Self, EngineError> {
        let (ready_tx, ready_rx) = sync_channel(1);
        let chunk = if prefill_chunk == 0 { usize::MAX } else { prefill_chunk };
        let actor = Actor::spawn(name, move |mailbox| match decoder.kernels.stepper(shape) {
            Ok(stepper) => {
                let _ = ready_tx.send(Ok(()));
                let turn = decoder.model.tokenizer.turn_start;
                let feeding = Feeding::new(turn, stepper.reuse(), chunk, cores.is_some());
                let cores = cores.map(|share| {
                    let width = Width::new(shape, usize::from(share.host_cores()));
                    (share, width)
                });
                run(stepper, &decoder.model.tokenizer, feeding, &mailbox, on_iteration, cores);
            }
            Err(e) => {
                let _ = ready_tx.send(Err(e));
            }
        })
        .map_err(|e| EngineError::Load(e.to_string()))?;
        ready_rx.recv().map_err(|_| EngineError::Stopped)??;
        Ok(Self { actor })
    }

    /// Adds generations to the batch; they start at the next iteration.
    pub fn join(&self, requests: Vec<GenRequest>) -> Result<(), EngineError> {
        self.send(Command::Join(requests))
    }

    /// Lets the next iteration start (after the last report was answered).
    pub fn resume(&self) -> Result<(), EngineError> {
        self.send(Command::Resume)
    }

    /// Stops generation `key` (its client left): it leaves at the end of the iteration running
    /// now, or of the next if none is, and is reported among that iteration's left ones.
    pub fn cancel(&self, key: u64) -> Result<(), EngineError> {
        self.send(Command::Cancel(key))
    }

    fn send(&self, command: Command) -> Result<(), EngineError> {
        self.actor.send(command).map_err(|_| EngineError::Stopped)
    }
}

/// How a prompt is cut into the pieces fed one per iteration.
#[derive(Debug, Clone, Copy)]
struct Feeding {
    /// The chat's turn-start token: a prompt's turn starts are where a kept prefix may end.
    turn: Option<u32>,
    /// The token a piece ends before ([`Reuse::piece_break`]).
    breaks: Option<u32>,
    /// Most tokens in a piece.
    chunk: usize,
    /// Most prompt tokens one step feeds in all (`usize::MAX`: every prefilling generation its
    /// piece). A step that shares the host's cores holds them to its end, so there the pieces of
    /// one step share one chunk: the first piece always, the next ones while they fit.
    step_prompt_tokens: usize,
}

impl Feeding {
    fn new(turn: Option<u32>, reuse: Reuse, chunk: usize, shared: bool) -> Self {
        let step_prompt_tokens = if shared { chunk } else { usize::MAX };
        Self { turn, breaks: reuse.piece_break(turn), chunk, step_prompt_tokens }
    }

    /// Which of the generations feed in the next step, each given as whether it decodes and
    /// how many tokens it would feed: every decoding one, and prefilling ones in order while
    /// their pieces fit the step's prompt tokens (the first always).
    fn members(self, generations: impl Iterator<Item = (bool, usize)>) -> Vec<bool> {
        let mut prompt_tokens = 0usize;
        generations
            .map(|(decoding, tokens)| {
                let fits =
                    decoding || prompt_tokens == 0 || prompt_tokens + tokens <= self.step_prompt_tokens;
                if fits && !decoding {
                    prompt_tokens += tokens;
                }
                fits
            })
            .collect()
    }

    fn starts(self, prompt: &[u32]) -> Vec<usize> {
        turn_starts(prompt, self.turn)
    }

    /// The piece of `prompt` fed from `from`.
    fn piece(self, prompt: &[u32], from: usize) -> std::ops::Range<usize> {
        next_piece(prompt, from, self.breaks, self.chunk)
    }
}

/// The thread's commands, applied between iterations.
#[derive(Default)]
struct Inbox {
    joined: Vec<GenRequest>,
    cancelled: Vec<u64>,
    resumed: bool,
    shutdown: bool,
}

impl Inbox {
    fn take(&mut self, command: Command) {
        match command {
            Command::Join(requests) => self.joined.extend(requests),
            Command::Resume => self.resumed = true,
            Command::Cancel(key) => self.cancelled.push(key),
        }
    }

    /// Everything sent so far, without waiting; the stop, if it came.
    fn drain(&mut self, mailbox: &Mailbox<Command>) {
        loop {
            match mailbox.try_recv() {
                Mail::Message(command) => self.take(command),
                Mail::Empty => return,
                Mail::Closed => {
                    self.shutdown = true;
                    return;
                }
            }
        }
    }
}

fn run(
    mut stepper: Box<dyn Stepper + '_>,
    tokenizer: &GgufTokenizer,
    feeding: Feeding,
    mailbox: &Mailbox<Command>,
    mut on_iteration: IterationHook,
    mut cores: Option<(CoreShare, Width)>,
) {
    let mut running: Vec<Running> = Vec::new();
    // Joined, waiting for a free place in the stepper, in join order.
    let mut queued: VecDeque<GenRequest> = VecDeque::new();
    let mut inbox = Inbox::default();
    // Whether the last report is still unanswered (the thread holds the next iteration).
    let mut waiting = false;
    loop {
        // Idle: wait for work. Holding: wait for Resume. Otherwise take what was sent.
        while !inbox.shutdown
            && ((running.is_empty() && queued.is_empty() && inbox.joined.is_empty())
                || (waiting && !inbox.resumed))
        {
            match mailbox.recv() {
                Some(command) => inbox.take(command),
                None => inbox.shutdown = true,
            }
        }
        inbox.drain(mailbox);
        if inbox.shutdown {
            break;
        }
        inbox.resumed = false;
        queued.extend(inbox.joined.drain(..));
        // Sequences stopped before this iteration leave without computing in it.
        let mut left = take_cancelled(stepper.as_mut(), &mut running, &mut queued, &mut inbox.cancelled);
        left.extend(admit(stepper.as_mut(), feeding, &mut queued, &mut running));
        let (mut failed, mut produced) = (false, 0);
        let (sequences, prefilling) = (running.len(), running.iter().any(|r| r.produced.is_empty()));
        let context = running.iter().map(|r| r.fed + r.produced.len()).sum();
        let mut seconds = 0.0;
        if !running.is_empty() {
            if let Some((share, width)) = &mut cores {
                widen_or_narrow(stepper.as_mut(), share, width);
            }
            // The step's time counts from when it holds its cores: those of one token, or of a
            // step that feeds more (a prompt's chunk, or several sequences).
            let tokens = if prefilling { usize::MAX } else { sequences };
            let threads =
                |width: &Width| Cores::try_from(width.current().threads_for(tokens)).unwrap_or(Cores::MAX);
            let _held = cores.as_ref().map(|(share, width)| share.hold(threads(width)));
            let started = std::time::Instant::now();
            let step = iterate(stepper.as_mut(), tokenizer, feeding, &mut running);
            seconds = started.elapsed().as_secs_f64();
            left.extend(step.finished);
            (failed, produced) = (step.failed, step.sampled);
        }
        // Stops that arrived during the iteration end with it.
        inbox.drain(mailbox);
        left.extend(take_cancelled(stepper.as_mut(), &mut running, &mut queued, &mut inbox.cancelled));
        inbox.cancelled.clear();
        waiting = !running.is_empty() || !queued.is_empty();
        on_iteration(IterationReport {
            left,
            failed,
            produced,
            empty: !waiting,
            sequences,
            prefilling,
            seconds,
            context,
        });
    }
    let unfinished = running.into_iter().map(|r| r.request).chain(queued).chain(inbox.joined);
    for request in unfinished {
        let _ = request.events.send(GenEvent::Failed(EngineError::Stopped));
    }
}

/// Before a step of an instance sharing the host's cores: its width as [`Width`] says, the
/// stepper remade on the new threads when it changes (a stepper that cannot be is left as it
/// runs, with a warning).
fn widen_or_narrow(stepper: &mut dyn Stepper, share: &CoreShare, width: &mut Width) {
    let now = std::time::Instant::now();
    let Some(shape) = width.next(share.host_idle(), now) else { return };
    match stepper.set_threads(shape) {
        Ok(()) => {
            let ms = now.elapsed().as_secs_f64() * 1e3;
            let instance = std::thread::current().name().unwrap_or_default().to_string();
            tracing::debug!(instance, threads = shape.threads, ms, "the decoder's threads changed");
        }
        Err(e) => {
            tracing::warn!(threads = shape.threads, error = %e, "the decoder stays on its threads");
            width.undo();
        }
    }
}

/// Takes the generations whose keys are in `cancelled` out of `running` and `queued`; their keys.
fn take_cancelled(
    stepper: &mut dyn Stepper,
    running: &mut Vec<Running>,
    queued: &mut VecDeque<GenRequest>,
    cancelled: &mut Vec<u64>,
) -> Vec<u64> {
    if cancelled.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    running.retain(|r| {
        let stop = cancelled.contains(&r.request.key);
        if stop {
            stepper.close(r.slot);
            out.push(r.request.key);
        }
        !stop
    });
    queued.retain(|r| {
        let stop = cancelled.contains(&r.key);
        if stop {
            out.push(r.key);
        }
        !stop
    });
    cancelled.retain(|k| !out.contains(k));
    out
}

/// Moves queued generations into `running` in join order while the stepper has a free place;
/// one whose prompt plus `max_tokens` no place could ever hold fails at once (its key returned).
fn admit(
    stepper: &mut dyn Stepper,
    feeding: Feeding,
    queued: &mut VecDeque<GenRequest>,
    running: &mut Vec<Running>,
) -> Vec<u64> {
    let mut failed = Vec::new();
    while let Some(request) = queued.front() {
        let starts = feeding.starts(&request.prompt);
        let opened = match stepper.open(
            &request.prompt,
            &starts,
            request.prompt.len() + request.max_tokens as usize,
        ) {
            Ok(Some(opened)) => opened,
            Ok(None) => break,
            Err(e) => {
                let _ = request.events.send(GenEvent::Failed(e));
                failed.push(request.key);
                queued.pop_front();
                continue;
            }
        };
        let Some(request) = queued.pop_front() else { break };
        let piece = feeding.piece(&request.prompt, opened.cached);
        running.push(Running {
            slot: opened.slot,
            feed: request.prompt[piece.clone()].to_vec(),
            fed: piece.end,
            cached: opened.cached,
            produced: Vec::new(),
            text: TextStream::default(),
            sampler: Sampler::constrained(request.decoding.sampling, request.decoding.grammar.as_ref()),
            stop: StopScan::new(request.decoding.stop.clone()),
            request,
        });
    }
    failed
}

/// What one step did.
struct Step {
    /// Keys of the generations that finished in it.
    finished: Vec<u64>,
    /// The step failed: every generation finished with the error.
    failed: bool,
    /// Tokens sampled (none for a generation still feeding its prompt).
    sampled: usize,
}

/// One step over every running generation: each feeds its next prompt chunk or its last token;
/// those whose prompt is all fed sample their next token.
fn iterate(
    stepper: &mut dyn Stepper,
    tokenizer: &GgufTokenizer,
    feeding: Feeding,
    running: &mut Vec<Running>,
) -> Step {
    let members = feeding.members(running.iter().map(|r| (!r.produced.is_empty(), r.feed.len())));
    let batch: Vec<(Slot, &[u32])> =
        running.iter().zip(&members).filter(|(_, m)| **m).map(|(r, _)| (r.slot, r.feed.as_slice())).collect();
    let logits = match stepper.step(&batch) {
        Ok(logits) => logits,
        Err(e) => {
            let keys = running
                .drain(..)
                .map(|r| {
                    stepper.close(r.slot);
                    let _ = r.request.events.send(GenEvent::Failed(e.clone()));
                    r.request.key
                })
                .collect();
            return Step { finished: keys, failed: true, sampled: 0 };
        }
    };
    let (mut finished, mut sampled) = (Vec::new(), 0);
    let mut kept = Vec::with_capacity(running.len());
    let mut rows = logits.into_iter();
    for (mut r, member) in running.drain(..).zip(members) {
        // A generation left out of this step feeds its piece in a later one.
        let Some(row) = member.then(|| rows.next()).flatten() else {
            kept.push(r);
            continue;
        };
        if r.fed < r.request.prompt.len() {
            // Still prefilling: this piece's logits are not a prediction anybody asked for.
            let piece = feeding.piece(&r.request.prompt, r.fed);
            (r.feed, r.fed) = (r.request.prompt[piece.clone()].to_vec(), piece.end);
            kept.push(r);
            continue;
        }
        sampled += 1;
        let next = r.sampler.sample(&row);
        let logprob = r.request.decoding.logprobs.map(|top| token_logprob(&row, next, usize::from(top)));
        let reason = if tokenizer.is_end(next) {
            Some(FinishReason::Stop)
        } else {
            r.produced.push(next);
            let fresh = r.text.next(tokenizer, &r.produced);
            let (text, stopped) = match r.stop.push(fresh) {
                Scanned::Text(text) => (text, false),
                Scanned::Stopped(text) => (text, true),
            };
            let _ = r.request.events.send(GenEvent::Token { id: next, text, logprob });
            match stopped {
                true => Some(FinishReason::Stop),
                false => (r.produced.len() >= r.request.max_tokens as usize).then_some(FinishReason::Length),
            }
        };
        match reason {
            Some(reason) => {
                let done = GenEvent::Done {
                    reason,
                    tail: r.stop.flush(),
                    prompt_tokens: r.request.prompt.len(),
                    cached_tokens: r.cached,
                    completion_tokens: r.produced.len(),
                };
                let _ = r.request.events.send(done);
                stepper.close(r.slot);
                finished.push(r.request.key);
            }
            None => {
                r.feed = vec![next];
                kept.push(r);
            }
        }
    }
    *running = kept;
    Step { finished, failed: false, sampled }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feeding(step_prompt_tokens: usize) -> Feeding {
        Feeding { turn: None, breaks: None, chunk: 48, step_prompt_tokens }
    }

    #[test]
    fn a_shared_step_feeds_every_decode_and_the_prompt_pieces_that_fit_its_chunk() {
        // Decoding (one token) or prefilling (a piece), in join order.
        let generations = [(false, 48), (true, 1), (false, 30), (false, 16), (true, 1), (false, 48)];
        let shared = feeding(48).members(generations.into_iter());
        assert_eq!(shared, [true, true, false, false, true, false], "the first piece fills the chunk");
        let later = [(false, 30), (false, 16), (false, 48)];
        assert_eq!(
            feeding(48).members(later.into_iter()),
            [true, true, false],
            "30 + 16 fit, 48 more do not"
        );
        let alone = feeding(usize::MAX).members(generations.into_iter());
        assert!(alone.iter().all(|&m| m), "a step of its own host's cores feeds every piece");
    }
}
