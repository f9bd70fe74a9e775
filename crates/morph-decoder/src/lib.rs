//! Decoder LMs for generation: a model from a GGUF file, run by llama.cpp's quantized kernels
//! (the fast path: any architecture llama.cpp runs) or candle in f32 (the reference path, and
//! the one pipeline stages run: the llama architecture only), with per-sequence KV caches for
//! continuous batching; the tokenizer and chat template from the GGUF metadata (run by llama.cpp
//! and minijinja), and sampling.

pub mod chat;
pub mod costs;
pub mod gguf_tokenizer;
pub mod grammar;
pub mod llama;
pub mod llamacpp;
mod llamacpp_init;
mod load;
pub mod logprobs;
pub mod model;
pub mod pieces;
pub mod prefill_weights;
pub mod prompt_cache;
pub mod reuse;
pub mod sampling;
pub mod stage;
pub mod stepper;
pub mod stop;
pub mod thread;
pub mod tool_calls;
mod weights;
pub mod width;

pub use chat::{ChatError, ChatTemplate, Message};
pub use gguf_tokenizer::GgufTokenizer;
pub use grammar::{Grammar, GrammarSource};
pub use llama::{Llama, LlamaConfig, SequenceCache};
pub use llamacpp::LlamaCppKernels;
pub use llamacpp_init::backend as llama_backend;
pub use load::{DecoderKernels, LoadedDecoder, load_decoder};
pub use logprobs::{TokenLogprob, token_logprob};
pub use model::DecoderModel;
pub use prefill_weights::PrefillWeights;
pub use prompt_cache::{CacheStats, LlamaPromptCache, PromptCache, PromptCacheConfig};
pub use reuse::Reuse;
pub use sampling::{LogitBias, Sampler, SamplingParams};
pub use stage::{DecoderStage, StageWeights};
pub use stepper::{CandleKernels, Opened, Outputs, Slot, StepKernels, Stepper, StepperShape};
pub use stop::{Scanned, StopScan};
pub use thread::{DecoderThread, Decoding, FinishReason, GenEvent, GenRequest, IterationReport, Reports};
pub use tool_calls::{AutoPiece, AutoReader, CallPiece, CallScanner, Tool, ToolCall, ToolFormat};
