//! Decoder LMs for generation: a Llama-architecture model from a GGUF file (candle's quantized
//! support) with per-sequence KV caches for continuous batching, the tokenizer from the GGUF
//! metadata, ChatML prompts and sampling.

pub mod chat;
pub mod files;
pub mod gguf_tokenizer;
pub mod llama;
pub mod sampling;
pub mod stage;
mod weights;
pub mod worker;

pub use chat::{Message, chatml_prompt};
pub use files::{DEFAULT_DECODER, fetch_default_decoder};
pub use gguf_tokenizer::GgufTokenizer;
pub use llama::{Llama, LlamaConfig, SequenceCache};
pub use sampling::{Sampler, SamplingParams};
pub use stage::{DecoderStage, StageWeights};
pub use worker::{
    DecoderWorker, FinishReason, GenEvent, GenRequest, IterationHook, IterationReport, Iterations,
};
