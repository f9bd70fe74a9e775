//! A decoder instance on its own OS thread, running its generations by steps: generations
//! join between steps ([`DecoderThread::join`]) and start once its [`Stepper`] has a free place
//! (in join order); each step is the one its driver sends ([`DecoderThread::step`]: the policy's
//! [`StepPlan`], which generations compute and how many prompt tokens each feeds). A step runs
//! one [`Stepper::step`] over its members, samples the next token of each whose prompt is all fed
//! and streams it to its caller; a generation leaves at its end-of-sequence token, at
//! `max_tokens`, at one of its stop strings ([`super::stop`]), or when stopped (its client left).
//! A prompt is fed in [`super::pieces`] of at most `prefill_chunk` tokens (chunked prefill), cut
//! shorter where the plan gives it fewer tokens, and starting at each turn of the chat where the
//! stepper reuses kept prefixes only there ([`Reuse::piece_break`]); its first token is sampled
//! after its last piece. Feeding starts where the stepper's kept cache of the prompt ends
//! ([`super::stepper::Opened`]).
//! After every step the thread sends its report ([`IterationReport`], with what each generation
//! left would feed next) down a channel and waits for the next step: it never calls its driver.

use std::collections::VecDeque;
use std::sync::mpsc::sync_channel;

use crate::gguf_tokenizer::GgufTokenizer;
use crate::grammar::Grammar;
use crate::load::LoadedDecoder;
use crate::logprobs::{TokenLogprob, token_logprob};
use crate::pieces::{Cut, next_piece, turn_starts};
use crate::reuse::Reuse;
use crate::sampling::{LogitBias, Sampler, SamplingParams};
use crate::stepper::{Outputs, Slot, Stepper, StepperShape};
use crate::stop::{Scanned, StopScan};
use crate::width::Width;
use morph_core::{Pending, RequestId, StepPlan};
use morph_engine::actor::{Actor, Mail, Mailbox};
use morph_engine::{CoreShare, Cores, EngineError};

/// Most tokens of a scored prompt fed in one step: its logits (a vocabulary's length each) are
/// held for the step, 256 × 49,152 floats (50 MB) for SmolLM2.
const SCORED_PIECE: usize = 256;

/// Why a generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// The model produced its end-of-sequence token, or the text reached a stop string.
    Stop,
    /// `max_tokens` were produced.
    Length,
}

/// What a generation's caller receives, in order: its prompt's log-probabilities where it asked
/// for them, its tokens as they are sampled, then one `Done` or `Failed`.
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
    /// Its prompt's tokens' log-probabilities, each but the first's under the tokens before it
    /// (asked by [`Decoding::score_prompt`]), once its prompt is all fed: before its first token.
    PromptLogprobs(Vec<TokenLogprob>),
    Failed(EngineError),
    /// The scheduler gave up on it before it ran (the driver sends this, not the thread).
    Dropped(morph_core::DropReason),
}

impl GenEvent {
    /// Whether it is a generation's last event: `Done`, `Failed` or `Dropped`.
    pub fn is_last(&self) -> bool {
        matches!(self, GenEvent::Done { .. } | GenEvent::Failed(_) | GenEvent::Dropped(_))
    }
}

/// How a generation draws its tokens, where it stops, and what it reports of them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decoding {
    pub sampling: SamplingParams,
    /// The generation ends where its text reaches one of these (cut before it).
    pub stop: Vec<String>,
    /// Each token's log-probability with this many of the most likely (`None`: not asked).
    pub logprobs: Option<u8>,
    /// The prompt's tokens' log-probabilities too (with `logprobs`' alternatives): its whole
    /// prompt is computed (no kept cache reused), and scored as it is fed.
    pub score_prompt: bool,
    /// The grammar its text must match (a JSON schema, a tool call), if any.
    pub grammar: Option<Grammar>,
    /// Added to tokens' logits before each draw.
    pub logit_bias: LogitBias,
}

impl Decoding {
    /// A sampler that draws as this asks: its parameters, bias and grammar.
    pub fn sampler(&self) -> Sampler {
        Sampler::constrained(self.sampling, self.grammar.as_ref()).with_bias(self.logit_bias.clone())
    }
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

/// What one step did: the keys of the generations that left the batch in it (finished, or
/// stopped), and whether the engine failed them all.
#[derive(Debug, Clone, PartialEq)]
pub struct IterationReport {
    pub left: Vec<u64>,
    pub failed: bool,
    /// Tokens sampled in it (one per generation that ran and did not fail).
    pub produced: usize,
    /// No generation remains; otherwise the thread waits for its next step.
    pub empty: bool,
    /// Every generation left, in join order, with what its next step would feed.
    pub pending: Vec<Pending>,
    /// The generations it computed, whether any of them fed a prompt chunk, and its wall time
    /// (for the decode cost a simulator prices: K(b) and the prefill).
    pub sequences: usize,
    pub prefilling: bool,
    pub seconds: f64,
    /// Tokens the computed generations' caches hold after it, summed: what their attention
    /// read (a step's cost grows with it as well as with `sequences`).
    pub context: usize,
}

/// Where the thread posts its reports, one per step: a channel's sender (the server's is
/// read by a task of its own; the thread waits for the step it answers with, and never runs
/// its driver's code).
pub type Reports = Box<dyn FnMut(IterationReport) + Send>;

/// The next step a driver sends.
enum NextStep {
    /// Every generation feeds its next piece (a driver that schedules nothing itself).
    Every,
    Plan(StepPlan),
}

enum Command {
    Join(Vec<GenRequest>),
    Step(NextStep),
    /// Take this generation out at the end of the current (or next) step, unanswered.
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
    /// Prompt tokens fed (the kept cache's included).
    fed: usize,
    /// Prompt tokens the stepper's kept cache held when it opened.
    cached: usize,
    produced: Vec<u32>,
    text: TextStream,
    stop: StopScan,
    sampler: Sampler,
    /// The prompt's tokens scored so far (with [`Decoding::score_prompt`]).
    scored: Vec<TokenLogprob>,
}

impl Running {
    /// Of a step's `logits` for the `fed` tokens of the prompt fed from position `from`: the
    /// last token's (what a draw reads); a scored prompt's tokens after each fed one are scored
    /// by that one's.
    fn score<'a>(&mut self, from: usize, fed: usize, logits: &'a [f32]) -> &'a [f32] {
        if !self.request.decoding.score_prompt || fed == 0 {
            return logits;
        }
        let vocab = logits.len() / fed;
        let top = usize::from(self.request.decoding.logprobs.unwrap_or(0));
        for (i, row) in logits.chunks_exact(vocab).enumerate() {
            if let Some(&next) = self.request.prompt.get(from + i + 1) {
                self.scored.push(token_logprob(row, next, top));
            }
        }
        &logits[logits.len() - vocab..]
    }

    /// The most prompt tokens it feeds in a step: a scored prompt's logits are held a piece at
    /// a time, so its pieces are bounded whatever the prefill chunk.
    fn most_fed(&self) -> usize {
        match self.request.decoding.score_prompt {
            true => SCORED_PIECE,
            false => usize::MAX,
        }
    }

    /// Draws the next token from `logits` and sends it; why the generation ends with it, if it
    /// does. An end-of-sequence token is sent (without text) only where the prompt is scored:
    /// a harness reads the drawn token's log-probability as the list's last.
    fn draw(&mut self, tokenizer: &GgufTokenizer, logits: &[f32]) -> Option<FinishReason> {
        let next = self.sampler.sample(logits);
        let logprob = self.request.decoding.logprobs.map(|top| token_logprob(logits, next, usize::from(top)));
        if tokenizer.is_end(next) {
            if self.request.decoding.score_prompt {
                let _ = self.request.events.send(GenEvent::Token { id: next, text: String::new(), logprob });
            }
            return Some(FinishReason::Stop);
        }
        self.produced.push(next);
        let fresh = self.text.next(tokenizer, &self.produced);
        let (text, stopped) = match self.stop.push(fresh) {
            Scanned::Text(text) => (text, false),
            Scanned::Stopped(text) => (text, true),
        };
        let _ = self.request.events.send(GenEvent::Token { id: next, text, logprob });
        match stopped {
            true => Some(FinishReason::Stop),
            false => {
                (self.produced.len() >= self.request.max_tokens as usize).then_some(FinishReason::Length)
            }
        }
    }
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
    /// `prefill_chunk` tokens per step at most (0: whole), its reports sent to `reports`.
    pub fn spawn(
        name: String,
        decoder: LoadedDecoder,
        shape: StepperShape,
        prefill_chunk: usize,
        reports: Reports,
    ) -> Result<Self, EngineError> {
        Self::spawn_sharing(name, decoder, shape, prefill_chunk, reports, None)
    }

    /// As [`Self::spawn`]; with `cores`, each iteration computes only while it holds the
    /// stepper's threads of the host's cores (see [`morph_engine::cores`]).
    pub fn spawn_sharing(
        name: String,
        decoder: LoadedDecoder,
        shape: StepperShape,
        prefill_chunk: usize,
        reports: Reports,
        cores: Option<CoreShare>,
    ) -> Result<Self, EngineError> {
        let (ready_tx, ready_rx) = sync_channel(1);
        let chunk = if prefill_chunk == 0 { usize::MAX } else { prefill_chunk };
        let actor = Actor::spawn(name, move |mailbox| match decoder.kernels.stepper(shape) {
            Ok(stepper) => {
                let _ = ready_tx.send(Ok(()));
                let turn = decoder.model.tokenizer.turn_start;
                let feeding = Feeding::new(turn, stepper.reuse(), chunk);
                let cores = cores.map(|share| {
                    let width = Width::new(shape, usize::from(share.host_cores()));
                    (share, width)
                });
                run(stepper, &decoder.model.tokenizer, feeding, &mailbox, reports, cores);
            }
            Err(e) => {
                let _ = ready_tx.send(Err(e));
            }
        })
        .map_err(|e| EngineError::Load(e.to_string()))?;
        ready_rx.recv().map_err(|_| EngineError::Stopped)??;
        Ok(Self { actor })
    }

    /// Adds generations to the batch; the next step takes them in (its plan says whether they
    /// compute in it).
    pub fn join(&self, requests: Vec<GenRequest>) -> Result<(), EngineError> {
        self.send(Command::Join(requests))
    }

    /// Runs the next step as `plan` says: once after each report that leaves generations, and
    /// once after joining generations to an idle thread.
    pub fn step(&self, plan: StepPlan) -> Result<(), EngineError> {
        self.send(Command::Step(NextStep::Plan(plan)))
    }

    /// Runs the next step over every generation, each feeding its next piece.
    pub fn step_every(&self) -> Result<(), EngineError> {
        self.send(Command::Step(NextStep::Every))
    }

    /// Stops generation `key` (its client left): it leaves at the end of the step running now,
    /// or of the next if none is, and is reported among that step's left ones.
    pub fn cancel(&self, key: u64) -> Result<(), EngineError> {
        self.send(Command::Cancel(key))
    }

    fn send(&self, command: Command) -> Result<(), EngineError> {
        self.actor.send(command).map_err(|_| EngineError::Stopped)
    }
}

/// How a prompt is cut into the pieces fed one per step.
#[derive(Debug, Clone, Copy)]
struct Feeding {
    /// The chat's turn-start token: the prompt cache looks for kept prefixes at turn starts.
    turn: Option<u32>,
    /// Before which token a piece ends ([`Reuse::piece_break`]), and its most tokens.
    cut: Cut,
}

impl Feeding {
    fn new(turn: Option<u32>, reuse: Reuse, chunk: usize) -> Self {
        Self { turn, cut: Cut { breaks: reuse.piece_break(turn), chunk } }
    }

    fn starts(self, prompt: &[u32]) -> Vec<usize> {
        turn_starts(prompt, self.turn)
    }

    /// The piece of `prompt` fed from `from`, at most `tokens` long.
    fn piece(self, prompt: &[u32], from: usize, tokens: usize) -> std::ops::Range<usize> {
        next_piece(prompt, from, self.cut.breaks, self.cut.chunk.min(tokens))
    }

    /// What `r`'s next step would feed.
    fn pending(self, r: &Running) -> Pending {
        let prompt = &r.request.prompt;
        let piece = if r.fed < prompt.len() { self.piece(prompt, r.fed, r.most_fed()).len() } else { 0 };
        let as_u32 = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        Pending {
            request: RequestId(r.request.key),
            prompt_left: as_u32(prompt.len() - r.fed),
            piece: as_u32(piece),
        }
    }
}

/// The thread's commands, applied between steps.
#[derive(Default)]
struct Inbox {
    joined: Vec<GenRequest>,
    cancelled: Vec<u64>,
    step: Option<NextStep>,
    shutdown: bool,
}

impl Inbox {
    fn take(&mut self, command: Command) {
        match command {
            Command::Join(requests) => self.joined.extend(requests),
            Command::Step(step) => self.step = Some(step),
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
    mut reports: Reports,
    mut cores: Option<(CoreShare, Width)>,
) {
    let mut running: Vec<Running> = Vec::new();
    // Joined, waiting for a free place in the stepper, in join order.
    let mut queued: VecDeque<GenRequest> = VecDeque::new();
    let mut inbox = Inbox::default();
    loop {
        // Wait for the next step, taking joins and stops as they come.
        while !inbox.shutdown && inbox.step.is_none() {
            match mailbox.recv() {
                Some(command) => inbox.take(command),
                None => inbox.shutdown = true,
            }
        }
        inbox.drain(mailbox);
        let Some(next) = inbox.step.take().filter(|_| !inbox.shutdown) else { break };
        queued.extend(inbox.joined.drain(..));
        // Sequences stopped before this step leave without computing in it.
        let mut left = take_cancelled(stepper.as_mut(), &mut running, &mut queued, &mut inbox.cancelled);
        left.extend(admit(stepper.as_mut(), feeding, &mut queued, &mut running));
        let feeds = feeds(feeding, &running, &next);
        let (mut failed, mut produced) = (false, 0);
        let members = running.iter().zip(&feeds).filter(|(_, f)| f.is_some());
        let sequences = members.clone().count();
        let prefilling = members.clone().any(|(r, _)| r.produced.is_empty());
        // What the members' caches hold after the step: the prompt fed so far and this piece, or
        // the prompt and every token produced (the last of which this step feeds).
        let held = |r: &Running, f: &Option<Vec<u32>>| match r.fed < r.request.prompt.len() {
            true => r.fed + f.as_ref().map_or(0, Vec::len),
            false => r.fed + r.produced.len(),
        };
        let context = members.map(|(r, f)| held(r, f)).sum();
        let mut seconds = 0.0;
        if sequences > 0 {
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
            let step = iterate(stepper.as_mut(), tokenizer, &mut running, feeds);
            seconds = started.elapsed().as_secs_f64();
            left.extend(step.finished);
            (failed, produced) = (step.failed, step.sampled);
        }
        // Stops that arrived during the step end with it.
        inbox.drain(mailbox);
        left.extend(take_cancelled(stepper.as_mut(), &mut running, &mut queued, &mut inbox.cancelled));
        inbox.cancelled.clear();
        let waiting = queued.iter().chain(&inbox.joined);
        let pending: Vec<Pending> =
            running.iter().map(|r| feeding.pending(r)).chain(waiting.map(fresh)).collect();
        let empty = pending.is_empty();
        let report = IterationReport {
            left,
            failed,
            produced,
            empty,
            pending,
            sequences,
            prefilling,
            seconds,
            context,
        };
        reports(report);
    }
    let unfinished = running.into_iter().map(|r| r.request).chain(queued).chain(inbox.joined);
    for request in unfinished {
        let _ = request.events.send(GenEvent::Failed(EngineError::Stopped));
    }
}

/// A joined generation not opened yet: it has not looked for a kept prefix of its prompt.
fn fresh(request: &GenRequest) -> Pending {
    Pending::fresh(RequestId(request.key), u32::try_from(request.prompt.len()).unwrap_or(u32::MAX))
}

/// What each of `running` feeds in the step `next` says: its last sampled token, or the next
/// piece of its prompt (cut to the plan's tokens); `None` where it sits the step out.
fn feeds(feeding: Feeding, running: &[Running], next: &NextStep) -> Vec<Option<Vec<u32>>> {
    running
        .iter()
        .map(|r| {
            let tokens = match next {
                NextStep::Every => usize::MAX,
                NextStep::Plan(plan) => plan.tokens_of(RequestId(r.request.key))? as usize,
            }
            .min(r.most_fed());
            let prompt = &r.request.prompt;
            Some(match r.produced.last() {
                Some(&last) if r.fed == prompt.len() => vec![last],
                _ => prompt[feeding.piece(prompt, r.fed, tokens)].to_vec(),
            })
        })
        .collect()
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
        let outputs = match request.decoding.score_prompt {
            true => Outputs::Every,
            false => Outputs::Last,
        };
        let tokens = request.prompt.len() + request.max_tokens as usize;
        let opened = match stepper.open_for(&request.prompt, &starts, feeding.cut, tokens, outputs) {
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
        running.push(Running {
            slot: opened.slot,
            fed: opened.cached,
            cached: opened.cached,
            produced: Vec::new(),
            text: TextStream::default(),
            sampler: request.decoding.sampler(),
            stop: StopScan::new(request.decoding.stop.clone()),
            scored: Vec::new(),
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

/// One step over the running generations `feeds` names: each feeds its piece or its last
/// token; those whose prompt is then all fed sample their next token.
fn iterate(
    stepper: &mut dyn Stepper,
    tokenizer: &GgufTokenizer,
    running: &mut Vec<Running>,
    feeds: Vec<Option<Vec<u32>>>,
) -> Step {
    let batch: Vec<(Slot, &[u32])> =
        running.iter().zip(&feeds).filter_map(|(r, f)| Some((r.slot, f.as_deref()?))).collect();
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
    for (mut r, feed) in running.drain(..).zip(feeds) {
        // A generation left out of this step waits for a later one.
        let Some((row, feed)) = feed.and_then(|f| Some((rows.next()?, f))) else {
            kept.push(r);
            continue;
        };
        let mut row = row.as_slice();
        if r.fed < r.request.prompt.len() {
            let from = r.fed;
            r.fed += feed.len();
            row = r.score(from, feed.len(), row);
            if r.fed < r.request.prompt.len() {
                // Still prefilling: this piece's last logits are not a prediction anybody asked for.
                kept.push(r);
                continue;
            }
            if r.request.decoding.score_prompt {
                let _ = r.request.events.send(GenEvent::PromptLogprobs(std::mem::take(&mut r.scored)));
            }
        }
        // A generation of no tokens (a prompt only scored) ends with its prompt.
        let reason = match r.request.max_tokens {
            0 => Some(FinishReason::Length),
            _ => {
                sampled += 1;
                r.draw(tokenizer, row)
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
            None => kept.push(r),
        }
    }
    *running = kept;
    Step { finished, failed: false, sampled }
}
