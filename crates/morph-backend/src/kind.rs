//! The `--engine` choice: what computes the batches.

use std::path::PathBuf;
use std::sync::Arc;

use morph_core::{LatencyProfile, TokenPlan};
use morph_decoder::{DecoderKernels, PromptCacheConfig};
use morph_encoder::onnx::Dtype;

/// Why a user's ONNX file cannot be cut into pipeline stages.
pub const NO_STAGES_OF_ONNX_FILE: &str = "pipeline stages of a user's ONNX file (Morph's own graphs only)";
/// Why candle's encoder cannot be.
pub const NO_STAGES_ON_CANDLE: &str =
    "pipeline stages need --engine ort (or emulated, or a decoder's prefill)";

/// What computes the batches.
#[derive(Debug, Clone)]
pub enum EngineKind {
    /// The candle encoder on the CPU.
    Candle,
    /// ONNX Runtime sessions of the graph Morph writes for each instance's unit (a runtime
    /// shape, a layer range), one per token plan in `plans` (the plain model always), or of
    /// the user's ONNX file `onnx` with its free dimensions pinned; Morph's graphs multiply their
    /// weights in `dtype`.
    Ort { library: PathBuf, onnx: Option<PathBuf>, plans: Vec<TokenPlan>, dtype: Dtype },
    /// Emulated instances taking their latency from a profile; vectors are placeholders.
    Emulated { profile: Arc<LatencyProfile>, dim: usize },
    /// A decoder LM from a GGUF file, for generation: each instance a continuous batch,
    /// feeding prompts `prefill_chunk` tokens per iteration at most (0: whole prompts), its
    /// steps run by `kernels`, its chats rendered by `chat_template` (Jinja) if given, else by
    /// the file's, keeping closed sequences' prompt states in host memory as `prompt_cache`
    /// says (llama.cpp's kernels only), a step that feeds more than one token on
    /// `batch_threads` (`None`: its instance's threads).
    Decoder {
        gguf: PathBuf,
        prefill_chunk: usize,
        batch_threads: Option<u16>,
        kernels: DecoderKernels,
        chat_template: Option<String>,
        prompt_cache: PromptCacheConfig,
    },
}

impl EngineKind {
    pub fn label(&self) -> &'static str {
        match self {
            EngineKind::Candle => "candle",
            EngineKind::Ort { dtype: Dtype::Int8, .. } => "onnxruntime-int8",
            EngineKind::Ort { .. } => "onnxruntime",
            EngineKind::Emulated { .. } => "emulated",
            EngineKind::Decoder { kernels, .. } => kernels.label(),
        }
    }

    /// The fingerprint of the code that writes and runs this engine's ONNX graph, which a cached
    /// latency profile must share to be reused; `None` for the engines that run no such graph.
    pub fn graph_fingerprint(&self) -> Option<&'static str> {
        match self {
            EngineKind::Ort { .. } => Some(morph_encoder::onnx::GRAPH_FINGERPRINT),
            EngineKind::Candle | EngineKind::Emulated { .. } | EngineKind::Decoder { .. } => None,
        }
    }

    /// What the model computes in, as TEI's `/info` names it (`model_dtype`).
    pub fn model_dtype(&self) -> &'static str {
        match self {
            EngineKind::Ort { dtype: Dtype::Int8, .. } => "int8",
            EngineKind::Decoder { .. } => "gguf",
            EngineKind::Candle | EngineKind::Ort { .. } | EngineKind::Emulated { .. } => "float32",
        }
    }

    /// What this engine can do, for the rules of what goes together (as a policy's `Needs`).
    pub fn can(&self) -> EngineCan {
        match self {
            EngineKind::Candle => EngineCan { stages: false, processes: false },
            // Layers are known (and cut, and rebuilt in a worker, in the same dtype) only in the
            // graphs Morph writes.
            EngineKind::Ort { onnx, .. } => EngineCan { stages: onnx.is_none(), processes: onnx.is_none() },
            EngineKind::Emulated { .. } => EngineCan { stages: true, processes: false },
            // A decoder's stages run its prefill on candle; only they run in worker processes.
            EngineKind::Decoder { kernels, .. } => {
                let candle = *kernels == DecoderKernels::Candle;
                EngineCan { stages: candle, processes: candle }
            }
        }
    }
}

/// What an engine can do besides whole-model instances in threads of the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineCan {
    /// Cut the model into pipeline stages of consecutive layers.
    pub stages: bool,
    /// Run its instances (a decoder: its prefill stages) as `morph worker` processes.
    pub processes: bool,
}
