//! The fast decoder path: llama.cpp's CPU kernels (through `llama-cpp-2`, built from its
//! vendored source) run the GGUF weights as shipped (Q4_1 with 8-bit activations for SmolLM2),
//! on every thread of the instance; with [`PrefillWeights::Q8_0`] a prompt's pieces of two tokens
//! or more run on an 8-bit copy of them, in a second context whose rows are copied to the first
//! before a decode step needs them ([`Contexts`]). Morph keeps the scheduling: a [`Stepper`] here is one
//! llama.cpp context (two with the copy, the same shape) holding the instance's sequences (one llama.cpp sequence id, and one KV
//! stream, per slot), and a step is one `llama_decode` over every decoding sequence's token,
//! so the weights are read once per step for the whole batch; each prompt chunk of two tokens
//! or more runs in a call of its own (one of a token rides in the decode call). Both choices
//! keep a sequence's numbers independent of what shares its steps (continuous batching gives
//! exactly the tokens of each sequence alone), which the recorded output lengths that SSJF's
//! oracle and predictor learn from rely on. In a call shared with decode tokens, llama.cpp
//! would cut a prompt chunk so that its first token shares a micro-batch with them, and that
//! token's attention would run in another kernel than alone.
//!
//! The limit of that exactness: once a sequence's KV stream spans 512 cells, llama.cpp's flash
//! attention runs its decode step alone in a kernel that splits the cache across threads, and
//! batched with others in one that does not; its logits then move with what shares its steps
//! (by up to 0.9 on a 631-token prompt). Flash attention off makes them exact at every length,
//! but costs 14–20% of the tokens/s (`decoder_speed`: 67.9 / 76.2 / 89.8 at 1 / 4 / 16 streams
//! against 78.7 / 93.5 / 113.5), so it stays on.
//!
//! With a stream per sequence, llama.cpp cuts a batch into micro-batches that each hold
//! consecutive sequence ids, in batch order: the decode tokens go in sequence-id order, or
//! four sequences in join order can cost up to four passes over the weights where one does
//! (at 4 streams on 2 cores, 41 ms a step against 31 ms).
//!
//! A closed sequence's prompt stays in its KV stream, and (with a [`PromptCache`]) its state is
//! copied to host memory: a later prompt that starts the same way (the chat template's system
//! message, a conversation's earlier rounds) opens in the free stream that holds the most of it,
//! or has the cache's longest reusable prefix restored into a free stream when that is more, and
//! skips to there. By [`Reuse::Turns`], the default, a stream records the kernel each of its
//! rows ran in ([`Kernel`]), and gives a prompt the rows that ran in the kernels the prompt fed
//! whole runs them in, as far as the rest, fed in [`super::pieces`] from there, runs in its
//! whole-feed kernels too: the logits are the same bit for bit. [`Reuse::Prefix`] trades that
//! exactness for the longest common prefix, as llama-server's prompt cache does (rows computed
//! a row at a time as answers are then reused where a prompt fed whole would tile them), and
//! has its prompts fed in plain chunks rather than a piece per turn.

use std::cmp::Reverse;
use std::num::NonZeroU32;
use std::path::Path;
use std::sync::{Arc, Mutex};

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::session::{LlamaStateSeqFlags, SeqState};

use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::token::LlamaToken;

use crate::llamacpp_init::backend;
use crate::pieces::{CALL_TOKENS, Cut, Kernel, WholeFeed, piece_kernels};
use crate::prefill_weights::{PrefillWeights, eight_bit_copy, kept_copies};
use crate::prompt_cache::{Found, LlamaPromptCache};
use crate::reuse::Reuse;
use crate::stepper::{Opened, Outputs, Slot, StepKernels, Stepper, StepperShape, fits, unopened};
use morph_engine::EngineError;

/// A GGUF decoder loaded by llama.cpp (weights memory-mapped, kept quantized).
pub struct LlamaCppKernels {
    model: LlamaModel,
    /// What the prompt pieces of two tokens or more run on, when not `model`
    /// ([`PrefillWeights::Q8_0`]).
    prefill: Option<LlamaModel>,
    /// llama.cpp builds one context at a time per model (it adjusts the model while it does).
    building: Mutex<()>,
    /// Closed sequences' prompt states, shared by every instance's stepper.
    prompt_cache: Option<Arc<LlamaPromptCache>>,
}

impl std::fmt::Debug for LlamaCppKernels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlamaCppKernels").field("layers", &self.model.n_layer()).finish_non_exhaustive()
    }
}

impl LlamaCppKernels {
    /// The decoder in `path`, prefilling on the file's weights.
    pub fn load(path: &Path) -> Result<Self, EngineError> {
        Self::load_prefilling(path, PrefillWeights::File)
    }

    /// The decoder in `path`, its prompts prefilled on `prefill`.
    pub fn load_prefilling(path: &Path, prefill: PrefillWeights) -> Result<Self, EngineError> {
        let load = |path: &Path| {
            LlamaModel::load_from_file(backend()?, path, &LlamaModelParams::default())
                .map_err(|e| EngineError::Load(format!("llama.cpp could not load {}: {e}", path.display())))
        };
        let started = std::time::Instant::now();
        // A copy that cannot be made (a tensor type candle does not read, a full or read-only
        // MORPH_HOME) or loaded leaves the file's weights to prefill: the server still starts.
        let without_copy = |e: EngineError| {
            tracing::warn!(error = %e, "prompts prefill on the GGUF's own weights: no 8-bit copy");
            None
        };
        let prefill = match prefill {
            PrefillWeights::File => None,
            PrefillWeights::Q8_0 => match eight_bit_copy(path, &kept_copies()) {
                Ok(None) => None,
                Ok(Some(copy)) => match load(&copy) {
                    Ok(model) => {
                        let (mib, took_ms) = (model.size() >> 20, started.elapsed().as_millis());
                        let copy = copy.display();
                        tracing::info!(mib, took_ms, %copy, "prompts prefill on an 8-bit copy of the GGUF's Q4_1 matrices");
                        Some(model)
                    }
                    Err(e) => {
                        // A kept copy llama.cpp cannot read is made again at the next start.
                        let _ = std::fs::remove_file(&copy);
                        without_copy(e)
                    }
                },
                Err(e) => without_copy(e),
            },
        };
        Ok(Self { model: load(path)?, prefill, building: Mutex::new(()), prompt_cache: None })
    }

    /// The same decoder keeping closed sequences' prompt states in `cache`.
    pub fn with_prompt_cache(self, cache: Arc<LlamaPromptCache>) -> Self {
        Self { prompt_cache: Some(cache), ..self }
    }
}

impl LlamaCppKernels {
    /// A context of the file's weights for `shape`'s sequences, on its threads, and one of the
    /// prefill weights' if they are others.
    fn contexts(&self, shape: StepperShape) -> Result<Contexts<'_>, EngineError> {
        let prefill = self.prefill.as_ref().map(|model| self.context(model, shape)).transpose()?;
        Ok(Contexts { main: self.context(&self.model, shape)?, prefill })
    }

    /// A context of `model` for `shape`'s sequences, on its threads.
    fn context<'m>(
        &self,
        model: &'m LlamaModel,
        shape: StepperShape,
    ) -> Result<LlamaContext<'m>, EngineError> {
        let sequences = u32::try_from(shape.sequences).map_err(|_| too_many(shape))?;
        let threads = i32::try_from(shape.threads.max(1)).map_err(|_| too_many(shape))?;
        let batch_threads = i32::try_from(shape.batch_threads.max(1)).map_err(|_| too_many(shape))?;
        let kv = shape.sequences.checked_mul(shape.seq_tokens).and_then(|n| u32::try_from(n).ok());
        let kv = kv.and_then(NonZeroU32::new).ok_or_else(|| too_many(shape))?;
        let params = LlamaContextParams::default()
            .with_n_ctx(Some(kv))
            // A KV stream per sequence (`seq_tokens` each), so that a sequence's attention never
            // spans another's cells: with one shared pool its logits moved by up to 1.2 with
            // what shared its steps; this way they are the same bit for bit.
            .with_kv_unified(false)
            .with_n_seq_max(sequences)
            .with_n_batch(CALL_TOKENS as u32)
            .with_n_threads(threads)
            .with_n_threads_batch(batch_threads);
        let _one_at_a_time = self.building.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        model
            .new_context(backend()?, params)
            .map_err(|e| EngineError::Load(format!("llama.cpp context for {shape:?}: {e}")))
    }
}

impl StepKernels for LlamaCppKernels {
    fn stepper(&self, shape: StepperShape) -> Result<Box<dyn Stepper + '_>, EngineError> {
        Ok(Box::new(LlamaCppStepper {
            kernels: self,
            ctx: self.contexts(shape)?,
            batch: LlamaBatch::new(CALL_TOKENS, 1),
            streams: vec![Stream::default(); shape.sequences],
            shape,
            reuse: self.prompt_cache.as_ref().map(|cache| cache.reuse()).unwrap_or_default(),
            cache: self.prompt_cache.clone(),
        }))
    }
}

fn too_many(shape: StepperShape) -> EngineError {
    EngineError::Load(format!("a llama.cpp decoder of {shape:?} does not fit its integer limits"))
}

/// A token fed in a step: its sequence's row in the step, llama.cpp sequence id and position,
/// and whether its logits are the row's (its last, or any of a sequence opened for every
/// token's).
#[derive(Debug, Clone, Copy)]
struct Fed {
    row: usize,
    seq: i32,
    pos: i32,
    token: LlamaToken,
    output: bool,
}

/// One KV stream (= llama.cpp sequence id): the tokens it holds from position 0 and the kernel
/// each ran in, of which the first `prompt` are its sequence's prompt (turn starts `starts`);
/// once that sequence closes, the prompt alone (as far as it was fed).
#[derive(Debug, Clone, Default)]
struct Stream {
    held: Vec<u32>,
    ran: Vec<Kernel>,
    /// Its prompt fed whole.
    whole: Option<WholeFeed>,
    prompt: usize,
    starts: Vec<usize>,
    open: bool,
    /// What its open sequence's steps give.
    outputs: Outputs,
    /// The prefill context holds rows of it that the main one lacks (its last call ran there).
    main_behind: bool,
    /// The prefill context may lack rows of it that the main one holds.
    prefill_behind: bool,
}

impl Stream {
    /// How many of `prompt`'s first tokens (fed whole: `whole`) this stream gives by `reuse`.
    fn reusable(&self, reuse: Reuse, prompt: &[u32], whole: &WholeFeed) -> usize {
        if self.open {
            return 0;
        }
        reuse.reusable(&self.held, &self.ran, prompt, whole)
    }

    /// Keeps the first `n` tokens.
    fn keep(&mut self, n: usize) {
        self.held.truncate(n);
        self.ran.truncate(n);
    }
}

/// A stepper's llama.cpp contexts: the file's weights', which runs every decode step, and the
/// prefill weights' where they are others, which runs the prompt pieces of two tokens or more
/// of sequences that want their last token's logits. A stream's rows are copied from one to the
/// other before a call there needs them.
struct Contexts<'m> {
    main: LlamaContext<'m>,
    prefill: Option<LlamaContext<'m>>,
}

struct LlamaCppStepper<'a> {
    /// What makes its contexts anew when its threads change.
    kernels: &'a LlamaCppKernels,
    ctx: Contexts<'a>,
    batch: LlamaBatch<'static>,
    /// By slot (= llama.cpp sequence id).
    streams: Vec<Stream>,
    shape: StepperShape,
    /// What a kept stream gives a new prompt: the prompt cache's rule, or [`Reuse::Turns`].
    reuse: Reuse,
    cache: Option<Arc<LlamaPromptCache>>,
}

impl Stepper for LlamaCppStepper<'_> {
    fn open_for(
        &mut self,
        prompt: &[u32],
        starts: &[usize],
        cut: Cut,
        tokens: usize,
        outputs: Outputs,
    ) -> Result<Option<Opened>, EngineError> {
        fits(tokens, self.shape)?;
        if self.streams.iter().all(|s| s.open) {
            return Ok(None);
        }
        let whole = cut.whole(prompt);
        // The free stream that holds the most of the prompt; the lowest on a tie, which keeps
        // the open ones' ids consecutive.
        let free = self.streams.iter().enumerate().filter(|(_, s)| !s.open);
        let best = match outputs {
            Outputs::Last => free
                .map(|(i, s)| (i, s.reusable(self.reuse, prompt, &whole)))
                .min_by_key(|&(i, kept)| (Reverse(kept), i)),
            // One computing every row reuses none: it takes the free stream that holds the
            // least, keeping the others' prompts for later ones.
            Outputs::Every => free.min_by_key(|&(i, s)| (s.held.len(), i)).map(|(i, _)| (i, 0)),
        };
        let Some((mut slot, mut cached)) = best else { return Ok(None) };
        let cache = self.cache.as_ref().filter(|_| outputs == Outputs::Last);
        let found = cache.and_then(|cache| cache.take(prompt, starts, cached));
        if let Some(found) = found {
            // Into the lowest free stream, for the same reason.
            slot = self.streams.iter().position(|s| !s.open).unwrap_or(slot);
            cached = self.restore(slot, &found);
        }
        // Removing a stream's tail cannot fail (only a partial removal of a recurrent model can).
        let _ = self.ctx.main.clear_kv_cache_seq(Some(slot as u32), Some(cached as u32), None);
        let stream = &mut self.streams[slot];
        stream.keep(cached);
        (stream.main_behind, stream.prefill_behind) = (false, true);
        // What a reused row ran in is the whole prompt's kernel (the stream's by the rule, a
        // cached state's at a turn start both prompts break at).
        stream.ran = whole.kernels()[..cached].to_vec();
        stream.whole = Some(whole);
        (stream.prompt, stream.starts, stream.open, stream.outputs) =
            (prompt.len(), starts.to_vec(), true, outputs);
        Ok(Some(Opened { slot: Slot(slot), cached }))
    }

    fn step(&mut self, batch: &[(Slot, &[u32])]) -> Result<Vec<Vec<f32>>, EngineError> {
        // The decode tokens (one per sequence) go in one call, in sequence-id order; each
        // prompt chunk in a call of its own (see the module on both).
        let mut order: Vec<usize> = (0..batch.len()).collect();
        order.sort_by_key(|&row| batch[row].0.0);
        let mut decoding = Vec::new();
        let (mut prefilling, mut calls) = (Vec::new(), Vec::new());
        for row in order {
            let (slot, feed) = batch[row];
            let stream = self.streams.get(slot.0).filter(|s| s.open).ok_or_else(|| unopened(slot))?;
            let mut tokens = Vec::with_capacity(feed.len());
            let every = stream.outputs == Outputs::Every;
            for (i, &id) in feed.iter().enumerate() {
                let token = LlamaToken(i32::try_from(id).map_err(|_| bad_token(id))?);
                let pos = (stream.held.len() + i) as i32;
                let output = every || i + 1 == feed.len();
                tokens.push(Fed { row, seq: slot.0 as i32, pos, token, output });
            }
            match tokens.len() {
                0 | 1 => decoding.extend(tokens),
                _ if self.ctx.prefill.is_some() && !every => prefilling.push(tokens),
                _ => calls.push(tokens),
            }
        }
        calls.push(decoding);
        let logits = self.decode(batch.len(), &prefilling, &calls);
        if logits.is_err() {
            // What a failed call left in the streams is unknown: no prompt may reuse any of it.
            for stream in &mut self.streams {
                stream.keep(0);
                (stream.main_behind, stream.prefill_behind) = (false, true);
            }
        } else {
            for &(slot, feed) in batch {
                let stream = &mut self.streams[slot.0];
                stream.ran.extend(ran_in(stream.held.len(), feed.len()));
                stream.held.extend_from_slice(feed);
            }
            for call in &prefilling {
                self.streams[call[0].seq as usize].main_behind = true;
            }
            for fed in calls.iter().flatten() {
                self.streams[fed.seq as usize].prefill_behind = true;
            }
        }
        logits
    }

    fn close(&mut self, slot: Slot) {
        if slot.0 >= self.streams.len() {
            return;
        }
        // What is kept stays in the main context.
        let caught_up = self.onto_main(slot.0).is_ok();
        let stream = &mut self.streams[slot.0];
        stream.open = false;
        let mut kept = self.reuse.kept(stream.held.len(), stream.prompt);
        if let (Reuse::Turns, Some(whole)) = (self.reuse, &stream.whole) {
            // The prompt cache reuses a state by its turns: only rows that ran as fed whole.
            kept = kept.min(whole.kept_as_fed(&stream.ran));
        }
        // Rows of a prompt scored token by token ran on the file's weights, where a later
        // prompt's own pieces would run on the prefill weights: none is reused.
        if !caught_up || (self.ctx.prefill.is_some() && stream.outputs == Outputs::Every) {
            kept = 0;
        }
        if !caught_up {
            // Neither context's rows are kept: the next opening starts both anew.
            (stream.main_behind, stream.prefill_behind) = (false, true);
        }
        let main = &mut self.ctx.main;
        let _ = main.clear_kv_cache_seq(Some(slot.0 as u32), Some(kept as u32), None);
        // A sliding-window layer's cache drops what falls out of its window: a stream that no
        // longer holds its first tokens cannot give any prefix.
        if main.kv_cache_seq_pos_min(slot.0 as i32) > 0 {
            let _ = main.clear_kv_cache_seq(Some(slot.0 as u32), None, None);
            kept = 0;
        }
        stream.keep(kept);
        let Some(cache) = &self.cache else { return };
        if kept > 0 {
            // A state that cannot be read is not kept; the stream itself still is.
            if let Ok(state) = main.state_seq_get(slot.0 as i32, LlamaStateSeqFlags::empty()) {
                let starts: Vec<usize> = stream.starts.iter().copied().filter(|&s| s < kept).collect();
                cache.put(stream.held.clone(), &starts, state);
            }
        }
    }

    fn reuse(&self) -> Reuse {
        self.reuse
    }

    /// llama.cpp fixes a context's threads when it is made: a new context takes every stream's
    /// cache (open sequences and kept prompts) from the old one, which then goes.
    fn set_threads(&mut self, shape: StepperShape) -> Result<(), EngineError> {
        let shape =
            StepperShape { sequences: self.shape.sequences, seq_tokens: self.shape.seq_tokens, ..shape };
        if shape == self.shape {
            return Ok(());
        }
        for slot in 0..self.streams.len() {
            self.onto_main(slot)?;
        }
        let mut ctx = self.kernels.contexts(shape)?;
        for (slot, stream) in self.streams.iter_mut().enumerate().filter(|(_, s)| !s.held.is_empty()) {
            copy_rows(&self.ctx.main, &mut ctx.main, slot)?;
            stream.prefill_behind = true;
        }
        self.ctx = ctx;
        self.shape = shape;
        Ok(())
    }
}

impl LlamaCppStepper<'_> {
    /// Restores `found`'s state into stream `slot`; the prompt tokens it now holds (0 if the
    /// state did not fit this context, the stream then emptied).
    fn restore(&mut self, slot: usize, found: &Found<SeqState>) -> usize {
        let _ = self.ctx.main.clear_kv_cache_seq(Some(slot as u32), None, None);
        let stream = &mut self.streams[slot];
        match self.ctx.main.state_seq_set(&found.state, slot as i32) {
            Ok(()) => {
                stream.held = found.tokens.clone();
                found.reused
            }
            Err(_) => {
                let _ = self.ctx.main.clear_kv_cache_seq(Some(slot as u32), None, None);
                stream.keep(0);
                0
            }
        }
    }

    /// Runs a step's tokens: `prefilling` on the prefill context, then `calls` on the main one,
    /// each in `llama_decode` calls of at most [`CALL_TOKENS`]; the logits of each of the step's
    /// `rows` (its output tokens', in order).
    fn decode(
        &mut self,
        rows: usize,
        prefilling: &[Vec<Fed>],
        calls: &[Vec<Fed>],
    ) -> Result<Vec<Vec<f32>>, EngineError> {
        let mut logits = vec![Vec::new(); rows];
        for call in prefilling {
            self.onto_prefill(call[0].seq as usize)?;
        }
        if let Some(prefill) = &mut self.ctx.prefill {
            run_calls(prefill, &mut self.batch, prefilling, &mut logits)?;
        }
        for fed in calls.iter().flatten() {
            self.onto_main(fed.seq as usize)?;
        }
        run_calls(&mut self.ctx.main, &mut self.batch, calls, &mut logits)?;
        Ok(logits)
    }

    /// Gives the main context stream `slot`'s rows that only the prefill one holds.
    fn onto_main(&mut self, slot: usize) -> Result<(), EngineError> {
        let (stream, ctx) = (&mut self.streams[slot], &mut self.ctx);
        if let (true, Some(prefill)) = (stream.main_behind, &ctx.prefill) {
            copy_rows(prefill, &mut ctx.main, slot)?;
            stream.main_behind = false;
        }
        Ok(())
    }

    /// Gives the prefill context stream `slot`'s rows, as the main one holds them.
    fn onto_prefill(&mut self, slot: usize) -> Result<(), EngineError> {
        let (stream, ctx) = (&mut self.streams[slot], &mut self.ctx);
        if let (true, Some(prefill)) = (stream.prefill_behind, &mut ctx.prefill) {
            let _ = prefill.clear_kv_cache_seq(Some(slot as u32), None, None);
            if !stream.held.is_empty() {
                copy_rows(&ctx.main, prefill, slot)?;
            }
            stream.prefill_behind = false;
        }
        Ok(())
    }
}

/// Runs each of `calls` in `llama_decode` calls of at most [`CALL_TOKENS`] on `ctx`, appending
/// each output token's logits to its row's.
fn run_calls(
    ctx: &mut LlamaContext<'_>,
    batch: &mut LlamaBatch<'static>,
    calls: &[Vec<Fed>],
    logits: &mut [Vec<f32>],
) -> Result<(), EngineError> {
    for call in calls.iter().flat_map(|c| c.chunks(CALL_TOKENS)).filter(|c| !c.is_empty()) {
        batch.clear();
        for t in call {
            batch.add(t.token, t.pos, &[t.seq], t.output).map_err(inference)?;
        }
        ctx.decode(batch).map_err(inference)?;
        for (i, t) in call.iter().enumerate().filter(|(_, t)| t.output) {
            logits[t.row].extend_from_slice(ctx.get_logits_ith(i as i32));
        }
    }
    Ok(())
}

/// Replaces sequence `slot`'s rows in `to` by those `from` holds.
fn copy_rows(from: &LlamaContext<'_>, to: &mut LlamaContext<'_>, slot: usize) -> Result<(), EngineError> {
    let copy = |e: String| EngineError::Inference(format!("copying sequence {slot}'s KV rows: {e}"));
    let state =
        from.state_seq_get(slot as i32, LlamaStateSeqFlags::empty()).map_err(|e| copy(e.to_string()))?;
    let _ = to.clear_kv_cache_seq(Some(slot as u32), None, None);
    to.state_seq_set(&state, slot as i32).map_err(|e| copy(e.to_string()))
}

/// The kernels a sequence's `fed` tokens of one step, fed after its first `held`, ran in: a
/// prompt chunk in calls of its own; a single token in the call of the step's decode tokens,
/// a row at a time whatever shares it while its stream's cache view stays under 512 cells
/// (llama.cpp pads the view to 256: [`LONE_UNSPLIT`]), else split or not by what shares it
/// and the threads.
fn ran_in(held: usize, fed: usize) -> impl Iterator<Item = Kernel> {
    let split = fed == 1 && held >= LONE_UNSPLIT;
    piece_kernels(fed).map(move |k| if split { Kernel::Shared } else { k })
}

/// While a stream holds fewer tokens than this, a token fed alone runs in the one-row kernel
/// unsplit: its cache view (padded to 256 cells) is under the 512 of the split kernel.
const LONE_UNSPLIT: usize = 256;

fn inference(e: impl std::fmt::Display) -> EngineError {
    EngineError::Inference(format!("llama.cpp: {e}"))
}

fn bad_token(id: u32) -> EngineError {
    EngineError::Inference(format!("token id {id} is beyond llama.cpp's range"))
}
