//! The seam between a decoder thread's scheduling and the kernels that run its steps: a
//! [`StepKernels`] (weights shared by every instance) hands each instance's thread a [`Stepper`]
//! (that instance's sequences and their KV caches). Two kinds of kernels: candle's f32 path
//! ([`CandleKernels`], the reference) and llama.cpp's quantized kernels
//! ([`super::llamacpp::LlamaCppKernels`], the fast one).

use std::sync::Arc;

use crate::llama::{Llama, SequenceCache};
use crate::model::DecoderModel;
use crate::pieces::Cut;
use crate::reuse::Reuse;
use morph_engine::EngineError;

/// A sequence's place in a [`Stepper`], from [`Stepper::open`] until [`Stepper::close`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot(pub usize);

/// What one instance's stepper is sized for: its KV cache holds `sequences × seq_tokens` tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepperShape {
    /// Most sequences at once.
    pub sequences: usize,
    /// Most tokens one sequence holds (its prompt plus its output).
    pub seq_tokens: usize,
    /// Threads of its kernels for a step that feeds one token (one sequence decoding).
    pub threads: usize,
    /// Threads for a step that feeds more (a prompt's chunk, or several sequences' tokens):
    /// llama.cpp's `n_threads_batch`.
    pub batch_threads: usize,
}

impl StepperShape {
    /// A shape whose every step runs on `threads`.
    pub fn new(sequences: usize, seq_tokens: usize, threads: usize) -> Self {
        Self { sequences, seq_tokens, threads, batch_threads: threads }
    }

    /// The same shape with every step on `threads`.
    pub fn all_on(self, threads: usize) -> Self {
        Self { threads, batch_threads: threads, ..self }
    }

    /// The threads of a step that feeds `tokens` tokens.
    pub fn threads_for(&self, tokens: usize) -> usize {
        if tokens > 1 { self.batch_threads } else { self.threads }
    }
}

/// A place given to a sequence, and how many of its prompt's first tokens that place's cache
/// holds already (left there by a sequence that closed in it): the caller feeds the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opened {
    pub slot: Slot,
    pub cached: usize,
}

/// Which of a sequence's fed tokens a step gives the logits of.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Outputs {
    /// The last one's: the next token's distribution, what a draw needs.
    #[default]
    Last,
    /// Every one's, in order: a prompt scored token by token (each token's log-probability
    /// under the ones before it). Such a sequence reuses no kept cache: every row is computed.
    Every,
}

/// One instance's sequences and their KV caches, driven by its decoder thread.
pub trait Stepper {
    /// A place for a sequence starting with `prompt` (turn starts `starts`) that will hold at
    /// most `tokens` tokens (prompt plus output), whose caller feeds the prompt in the pieces
    /// `cut` makes: from `cached` on they give the numbers the whole prompt gets (under
    /// [`Reuse::Turns`]). `None` while every place is taken (one frees when a sequence closes),
    /// an error when no place could ever hold that many. Its steps give its last token's logits.
    fn open(
        &mut self,
        prompt: &[u32],
        starts: &[usize],
        cut: Cut,
        tokens: usize,
    ) -> Result<Option<Opened>, EngineError> {
        self.open_for(prompt, starts, cut, tokens, Outputs::Last)
    }

    /// As [`Self::open`], its steps giving the logits `outputs` says.
    fn open_for(
        &mut self,
        prompt: &[u32],
        starts: &[usize],
        cut: Cut,
        tokens: usize,
        outputs: Outputs,
    ) -> Result<Option<Opened>, EngineError>;

    /// One forward step: `batch[i].1` are the tokens sequence `batch[i].0` feeds now (a prompt
    /// chunk, or the token it sampled last), appended to its cache. Each sequence's
    /// next-token logits; for one opened for [`Outputs::Every`], those after each token it fed,
    /// one vocabulary's length after another.
    fn step(&mut self, batch: &[(Slot, &[u32])]) -> Result<Vec<Vec<f32>>, EngineError>;

    /// Frees the sequence's place (a stepper may keep its cache for a later prompt that starts
    /// the same way).
    fn close(&mut self, slot: Slot);

    /// What a kept sequence gives a new prompt here, which says where the prompt's pieces
    /// must break ([`Reuse::piece_break`]).
    fn reuse(&self) -> Reuse {
        Reuse::Turns
    }

    /// Runs the later steps on `shape`'s threads (its sequences and lengths unchanged); every
    /// sequence, open or kept, keeps its cache. candle's kernels take the process's threads:
    /// there it changes nothing.
    fn set_threads(&mut self, shape: StepperShape) -> Result<(), EngineError> {
        let _ = shape;
        Ok(())
    }
}

/// Weights shared by every instance, each running its own [`Stepper`].
pub trait StepKernels: std::fmt::Debug + Send + Sync {
    /// A stepper for one instance's thread (created on that thread).
    fn stepper(&self, shape: StepperShape) -> Result<Box<dyn Stepper + '_>, EngineError>;
}

/// candle's f32 decoder (the quantized weights expanded when loaded): the reference path.
#[derive(Debug, Clone)]
pub struct CandleKernels(pub Arc<DecoderModel>);

impl StepKernels for CandleKernels {
    fn stepper(&self, shape: StepperShape) -> Result<Box<dyn Stepper + '_>, EngineError> {
        Ok(Box::new(CandleStepper { llama: &self.0.llama, caches: vec![None; shape.sequences], shape }))
    }
}

/// Per-sequence caches as candle tensors; attention runs per sequence.
struct CandleStepper<'a> {
    llama: &'a Llama,
    /// By slot: the sequence's cache and outputs; `None` while the slot is free.
    caches: Vec<Option<(SequenceCache, Outputs)>>,
    shape: StepperShape,
}

impl Stepper for CandleStepper<'_> {
    fn open_for(
        &mut self,
        _prompt: &[u32],
        _starts: &[usize],
        _cut: Cut,
        tokens: usize,
        outputs: Outputs,
    ) -> Result<Option<Opened>, EngineError> {
        fits(tokens, self.shape)?;
        let Some(free) = self.caches.iter().position(Option::is_none) else { return Ok(None) };
        self.caches[free] = Some((self.llama.new_cache(), outputs));
        Ok(Some(Opened { slot: Slot(free), cached: 0 }))
    }

    fn step(&mut self, batch: &[(Slot, &[u32])]) -> Result<Vec<Vec<f32>>, EngineError> {
        let mut caches: Vec<Option<&mut (SequenceCache, Outputs)>> =
            self.caches.iter_mut().map(Option::as_mut).collect();
        let (mut rows, mut every) = (Vec::with_capacity(batch.len()), Vec::with_capacity(batch.len()));
        for &(slot, tokens) in batch {
            let (cache, outputs) =
                caches.get_mut(slot.0).and_then(Option::take).ok_or_else(|| unopened(slot))?;
            rows.push((tokens, cache));
            every.push(*outputs == Outputs::Every);
        }
        self.llama.step_outputs(&mut rows, &every)
    }

    fn close(&mut self, slot: Slot) {
        if let Some(cache) = self.caches.get_mut(slot.0) {
            *cache = None;
        }
    }
}

/// An error if a sequence of `tokens` (prompt plus output) could never fit one of `shape`'s places.
pub(super) fn fits(tokens: usize, shape: StepperShape) -> Result<(), EngineError> {
    if tokens > shape.seq_tokens {
        let held = shape.seq_tokens;
        return Err(EngineError::Unsupported(format!(
            "the prompt plus max_tokens ({tokens} tokens) exceed the {held} a sequence of this instance's KV cache holds"
        )));
    }
    Ok(())
}

/// A step naming a slot that is not open (or twice).
pub(super) fn unopened(slot: Slot) -> EngineError {
    EngineError::Inference(format!("decoder slot {} is not open (or is in a step twice)", slot.0))
}
