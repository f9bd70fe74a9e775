//! A decoder loaded from its GGUF file for the kernels that run it: llama.cpp's (with its
//! host-memory prompt cache) or candle's ([`super::stepper`] is the seam both implement).

use std::sync::Arc;

use crate::llama::Llama;
use crate::llamacpp::LlamaCppKernels;
use crate::model::DecoderModel;
use crate::prefill_weights::PrefillWeights;
use crate::prompt_cache::{LlamaPromptCache, PromptCacheConfig};
use crate::stepper::{CandleKernels, StepKernels};
use morph_engine::EngineError;

/// What runs a decoder's steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecoderKernels {
    /// llama.cpp's CPU kernels on the GGUF weights as shipped (quantized): the fast path.
    LlamaCpp,
    /// candle with the weights expanded to f32: the reference path, and what a decoder's
    /// prefill stages run on.
    Candle,
}

impl DecoderKernels {
    /// The engine name `/info` shows for a decoder on these kernels.
    pub fn label(self) -> &'static str {
        match self {
            Self::LlamaCpp => "llama.cpp-decoder",
            Self::Candle => "candle-decoder",
        }
    }
}

impl std::str::FromStr for DecoderKernels {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "llama-cpp" => Ok(Self::LlamaCpp),
            "candle" => Ok(Self::Candle),
            other => Err(format!("'{other}' is not llama-cpp or candle")),
        }
    }
}

/// A decoder as loaded: its shape and tokenizer (and, on candle, its weights), the kernels
/// that run its steps, and the host-memory cache of its closed sequences' prompts (llama.cpp's).
#[derive(Debug, Clone)]
pub struct LoadedDecoder {
    pub model: Arc<DecoderModel>,
    pub kernels: Arc<dyn StepKernels>,
    pub prompt_cache: Option<Arc<LlamaPromptCache>>,
}

/// The decoder at `gguf` for `kernels`, chatting by `chat_template` (Jinja) if given, else by
/// the template in the file, keeping closed sequences' prompt states in host memory as
/// `prompt_cache` says and prefilling prompts on `prefill` (both llama.cpp only).
pub fn load_decoder(
    gguf: &std::path::Path,
    kernels: DecoderKernels,
    chat_template: Option<&str>,
    prompt_cache: PromptCacheConfig,
    prefill: PrefillWeights,
) -> Result<LoadedDecoder, EngineError> {
    let with_template = |model: DecoderModel| match chat_template {
        Some(source) => {
            Ok(DecoderModel { tokenizer: model.tokenizer.with_chat_template(source.to_string())?, ..model })
        }
        None => Ok::<_, EngineError>(model),
    };
    Ok(match kernels {
        DecoderKernels::LlamaCpp => {
            let cache = (prompt_cache.bytes > 0)
                .then(|| Arc::new(LlamaPromptCache::new(prompt_cache.bytes, prompt_cache.reuse)));
            let loaded = LlamaCppKernels::load_prefilling(gguf, prefill)?;
            let loaded = match &cache {
                Some(cache) => loaded.with_prompt_cache(cache.clone()),
                None => loaded,
            };
            LoadedDecoder {
                model: Arc::new(with_template(Llama::load_shape(gguf)?)?),
                kernels: Arc::new(loaded),
                prompt_cache: cache,
            }
        }
        DecoderKernels::Candle => {
            let model = Arc::new(with_template(Llama::load(gguf)?)?);
            LoadedDecoder {
                model: model.clone(),
                kernels: Arc::new(CandleKernels(model)),
                prompt_cache: None,
            }
        }
    })
}
