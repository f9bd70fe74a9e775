//! A decoder's generation costs measured through a [`Stepper`] (what a decoder thread drives):
//! one sequence's prefill and decode steps on synthetic prompts. The server measures them when it
//! starts a policy that weighs jobs by them (SSJF); `--bench decoder_latency` builds its tables
//! from the same steps.

use morph_core::GenerationCosts;
use morph_engine::EngineError;
use morph_engine::timing::median;

use crate::pieces::Cut;
use crate::stepper::{Slot, StepKernels, Stepper, StepperShape};

/// The prompt the server's measurement prefills: a token of it costs what a token of a longer
/// prompt does (SmolLM2 on 2 cores: 3.4 ms a token at 32 and at 1,024).
const MEASURED_PROMPT: usize = 32;
/// Prefills timed (after one that warms the kernels up), and decode steps timed.
const PREFILL_RUNS: usize = 2;
const STEP_RUNS: usize = 4;
/// The tokens a sequence holds while its decode steps are timed (a step's cost hardly grows
/// with its context at this length; SmolLM2 with 4 sequences: 20.4 ms at 128, 29.8 ms at 512).
const STEP_CONTEXT: usize = 8;

/// `len` token ids that are not special tokens, different for each `seed` (so a kept cache
/// holds none of another seed's prompt).
fn synthetic_prompt(len: usize, seed: usize) -> Vec<u32> {
    (0..len).map(|i| 1000 + ((i + seed * 131) as u32 * 7919) % 40_000).collect()
}

/// Milliseconds `f` took, and what it returned.
fn timed<T>(f: impl FnOnce() -> T) -> (f64, T) {
    let start = std::time::Instant::now();
    let out = f();
    (start.elapsed().as_secs_f64() * 1e3, out)
}

/// Opens a sequence for `ids` that will hold `tokens` at most, and feeds `ids` in pieces of at
/// most `piece` tokens.
fn prefill(stepper: &mut dyn Stepper, ids: &[u32], tokens: usize, piece: usize) -> Result<Slot, EngineError> {
    let opened = stepper
        .open(ids, &[], Cut { breaks: None, chunk: piece }, tokens)?
        .ok_or_else(|| EngineError::Inference("no free place to measure a prefill in".into()))?;
    for chunk in ids.chunks(piece.max(1)) {
        stepper.step(&[(opened.slot, chunk)])?;
    }
    Ok(opened.slot)
}

/// Median ms of `runs` decode steps of sequences holding `contexts` prompt tokens (each
/// prefilled in pieces of `piece`), closed afterwards.
pub fn step_ms(
    stepper: &mut dyn Stepper,
    contexts: &[usize],
    runs: usize,
    piece: usize,
) -> Result<f64, EngineError> {
    let mut slots = Vec::with_capacity(contexts.len());
    for (seed, &context) in contexts.iter().enumerate() {
        slots.push(prefill(stepper, &synthetic_prompt(context, seed), context + runs + 1, piece)?);
    }
    let token = [504u32];
    let step: Vec<(Slot, &[u32])> = slots.iter().map(|&s| (s, &token[..])).collect();
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let (ms, logits) = timed(|| stepper.step(&step));
        logits?;
        times.push(ms);
    }
    for slot in slots {
        stepper.close(slot);
    }
    Ok(median(times))
}

/// Median ms of prefilling `len` tokens in one sequence, a fresh prompt each of `runs` times.
pub fn prefill_ms(
    stepper: &mut dyn Stepper,
    len: usize,
    runs: usize,
    piece: usize,
) -> Result<f64, EngineError> {
    let mut times = Vec::with_capacity(runs);
    for run in 0..runs {
        let ids = synthetic_prompt(len, 100 + run);
        let (ms, slot) = timed(|| prefill(stepper, &ids, len, piece));
        stepper.close(slot?);
        times.push(ms);
    }
    Ok(median(times))
}

/// One sequence's decode step and a prompt token's prefill on `kernels`, on a stepper of
/// `shape`'s threads (one sequence).
pub fn measure(kernels: &dyn StepKernels, shape: StepperShape) -> Result<GenerationCosts, EngineError> {
    let seq_tokens = MEASURED_PROMPT.max(STEP_CONTEXT + STEP_RUNS + 1);
    let mut stepper = kernels.stepper(StepperShape { sequences: 1, seq_tokens, ..shape })?;
    let stepper = stepper.as_mut();
    prefill_ms(stepper, MEASURED_PROMPT, 1, MEASURED_PROMPT)?;
    let prefill = prefill_ms(stepper, MEASURED_PROMPT, PREFILL_RUNS, MEASURED_PROMPT)?;
    let step = step_ms(stepper, &[STEP_CONTEXT], STEP_RUNS, STEP_CONTEXT)?;
    Ok(GenerationCosts { step_ms: step, prefill_token_ms: Some(prefill / MEASURED_PROMPT as f64) })
}
