//! A decoder cut into pipeline stages of consecutive layers, prefill only: one forward pass
//! per request, as QUART's functions run (SmolLM2-135M's 30 layers in 5 stages of 6). Stage 0
//! embeds the prompt's tokens; every stage runs its layers over the whole prompt and hands the
//! hidden states on; the last one returns the next-token logits at the prompt's last position.

use std::ops::Range;
use std::sync::Arc;

use candle_core::{Device, Tensor};
use morph_core::{RuntimeSpec, StageSpec, TokenPlan};

use crate::{DecoderModel, Llama};
use morph_engine::{BatchInput, Engine, EngineError, check_lengths};

/// What holds a stage's weights: the server's whole model (with its tokenizer), or a worker
/// process's [`Llama`] of the stage's layers alone.
pub trait StageWeights: std::fmt::Debug + Send + Sync {
    fn llama(&self) -> &Llama;
}

impl StageWeights for Llama {
    fn llama(&self) -> &Llama {
        self
    }
}

impl StageWeights for DecoderModel {
    fn llama(&self) -> &Llama {
        &self.llama
    }
}

/// One stage of a decoder's prefill.
#[derive(Debug)]
pub struct DecoderStage {
    model: Arc<dyn StageWeights>,
    runtime: RuntimeSpec,
    layers: Range<usize>,
    last: bool,
}

impl DecoderStage {
    /// The prefill of `stage`'s layers, or of every layer (the whole model's prefill) with `None`.
    pub fn new(model: Arc<dyn StageWeights>, runtime: RuntimeSpec, stage: Option<StageSpec>) -> Self {
        let all = model.llama().config.layers;
        let layers = stage.map_or(0..all, |s| usize::from(s.first_layer)..usize::from(s.end_layer));
        let last = layers.end >= all;
        Self { model, runtime, layers, last }
    }
}

impl Engine for DecoderStage {
    fn runtime(&self) -> RuntimeSpec {
        self.runtime
    }

    /// The hidden size: what every stage but the last hands on per token.
    fn dim(&self) -> usize {
        self.model.llama().config.hidden
    }

    fn run(&mut self, input: BatchInput<'_>, plan: TokenPlan) -> Result<Vec<Vec<f32>>, EngineError> {
        if plan != TokenPlan::Plain {
            return Err(EngineError::Unsupported(format!("token plan {plan} on a decoder stage")));
        }
        let llama = self.model.llama();
        let hidden = llama.config.hidden;
        let (x, lens) = match (input, input.tokens()) {
            (_, Some(rows)) if self.layers.start == 0 => {
                let lens: Vec<usize> = rows.iter().map(Vec::len).collect();
                let ids: Vec<u32> = rows.iter().flatten().copied().collect();
                (llama.embed_ids(&ids)?, lens)
            }
            (BatchInput::Hidden(rows), _) if self.layers.start > 0 => {
                let lens: Vec<usize> = rows.iter().map(|r| r.len() / hidden).collect();
                let flat: Vec<f32> = rows.iter().flatten().copied().collect();
                let total = flat.len() / hidden;
                (Tensor::from_vec(flat, (total, hidden), &Device::Cpu)?, lens)
            }
            _ => return Err(EngineError::Unsupported("this input on this decoder stage".into())),
        };
        check_lengths(self.runtime, &lens)?;
        let x = llama.prefill_layers(self.layers.clone(), x, &lens)?;
        let ends = lens.iter().scan(0u32, |end, &n| {
            *end += n as u32;
            Some(*end)
        });
        if self.last {
            return llama.head_logits(&x, ends.map(|e| e - 1).collect());
        }
        let x = x.to_vec2::<f32>()?;
        let mut rows = Vec::with_capacity(lens.len());
        let mut at = 0;
        for n in lens {
            rows.push(x[at..at + n].concat());
            at += n;
        }
        Ok(rows)
    }
}
