//! The predictor at work: prompt text → the frozen encoder's pooled, normalised vector of the
//! prompt's last 512 tokens (§3.1) → the trained head → a predicted output length.

use std::path::Path;

use candle_core::{Device, Tensor};

use super::head::{HeadMeta, LengthHead};
use super::prompt::keep_last;
use crate::pooling::l2_normalize;
use morph_core::TokenPlan;

use morph_engine::{BatchInput, Engine, EngineError};

use crate::TextTokenizer;

/// The longest prompt suffix the encoder reads (§3.1).
pub const PROMPT_TOKENS: usize = 512;

/// The subdirectory of a saved predictor that holds its encoder, when its top layers were
/// tuned with the head (`morph train predictor --tune-layers`); otherwise the head reads the
/// default encoder.
pub const TUNED_ENCODER: &str = "encoder";

/// The head trained on SmolLM2-135M-Instruct's own output lengths on the served llama.cpp path
/// over all-MiniLM-L6-v2: what `morph serve --task generate` predicts with unless told
/// otherwise. Made by `experiments/ssjf_llamacpp_predictor.sh --out assets/weights/predictor`
/// (trained on assets/datasets/smollm2_llamacpp_train_lengths.jsonl, scored on the held-out
/// recording's test rounds).
pub const BUILTIN_WEIGHTS: &[u8] = morph_assets::weights::LENGTH_HEAD;
pub const BUILTIN_META: &str = morph_assets::weights::LENGTH_HEAD_META;

/// Pooled, normalised vectors of `texts`, each cut to its last [`PROMPT_TOKENS`] tokens, on the
/// plain model; returned in order.
pub fn embed_prompts(
    tokenizer: &TextTokenizer,
    encoder: &mut dyn Engine,
    texts: &[impl AsRef<str>],
) -> Result<Vec<Vec<f32>>, EngineError> {
    embed_ids(encoder, &prompt_ids(tokenizer, texts)?, TokenPlan::Plain)
}

/// The token ids the encoder reads of each of `texts`: its last [`PROMPT_TOKENS`] tokens.
pub fn prompt_ids(
    tokenizer: &TextTokenizer,
    texts: &[impl AsRef<str>],
) -> Result<Vec<Vec<u32>>, EngineError> {
    texts.iter().map(|t| tokenizer.encode(t.as_ref()).map(|ids| keep_last(&ids, PROMPT_TOKENS))).collect()
}

/// Pooled, normalised vectors of token-id rows under token plan `plan`, run in batches of the
/// encoder's `max_batch`, shortest first (little padding); returned in order.
pub fn embed_ids(
    encoder: &mut dyn Engine,
    ids: &[Vec<u32>],
    plan: TokenPlan,
) -> Result<Vec<Vec<f32>>, EngineError> {
    let mut order: Vec<usize> = (0..ids.len()).collect();
    order.sort_by_key(|&i| ids[i].len());
    let mut vectors = vec![Vec::new(); ids.len()];
    for chunk in order.chunks(encoder.runtime().max_batch.max(1) as usize) {
        let batch: Vec<Vec<u32>> = chunk.iter().map(|&i| ids[i].clone()).collect();
        for (&i, mut v) in chunk.iter().zip(encoder.run(BatchInput::Tokens(&batch), plan)?) {
            l2_normalize(&mut v);
            vectors[i] = v;
        }
    }
    Ok(vectors)
}

/// Vectors as one `[n, dim]` tensor.
pub fn stack(vectors: &[Vec<f32>]) -> Result<Tensor, EngineError> {
    let dim = vectors.first().map_or(0, Vec::len);
    let flat: Vec<f32> = vectors.iter().flatten().copied().collect();
    Ok(Tensor::from_vec(flat, (vectors.len(), dim), &Device::Cpu)?)
}

/// A trained head with the encoder it reads.
pub struct LengthPredictor {
    tokenizer: TextTokenizer,
    encoder: Box<dyn Engine>,
    head: LengthHead,
    pub meta: HeadMeta,
}

impl std::fmt::Debug for LengthPredictor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LengthPredictor").field("meta", &self.meta).finish_non_exhaustive()
    }
}

impl LengthPredictor {
    /// The head saved in `dir` (by `morph train predictor --out DIR`), or the built-in one.
    pub fn new(
        tokenizer: TextTokenizer,
        encoder: Box<dyn Engine>,
        dir: Option<&Path>,
    ) -> Result<Self, EngineError> {
        let (weights, meta) = match dir {
            Some(dir) => {
                let read = |name: &str| {
                    std::fs::read(dir.join(name))
                        .map_err(|e| EngineError::Load(format!("{}: {e}", dir.join(name).display())))
                };
                (read("head.safetensors")?, String::from_utf8_lossy(&read("predictor.json")?).into_owned())
            }
            None => (BUILTIN_WEIGHTS.to_vec(), BUILTIN_META.to_string()),
        };
        let meta: HeadMeta =
            serde_json::from_str(&meta).map_err(|e| EngineError::Load(format!("predictor.json: {e}")))?;
        if meta.dim != encoder.dim() {
            return Err(EngineError::Load(format!(
                "the predictor's head reads {}-wide vectors ({}), the encoder gives {}",
                meta.dim,
                meta.encoder,
                encoder.dim()
            )));
        }
        let head = LengthHead::from_saved(&weights, &meta)?;
        Ok(Self { tokenizer, encoder, head, meta })
    }

    /// Predicted output lengths of `texts`, in one pass per encoder batch.
    pub fn predict(&mut self, texts: &[impl AsRef<str>]) -> Result<Vec<u32>, EngineError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let vectors = embed_prompts(&self.tokenizer, self.encoder.as_mut(), texts)?;
        self.head.predict(&stack(&vectors)?)
    }
}
