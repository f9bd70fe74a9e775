//! What `morph serve` asks of the server ([`ServerConfig`]), and why a configuration cannot be
//! built ([`BuildError`]).

use morph_backend::EngineKind;
use morph_core::RuntimeSpec;
use morph_encoder::Pooling;
use morph_engine::EngineError;
use morph_fetch::ModelFiles;
use morph_policy::registry::{self, Context};

use crate::connections::ConnectionLimits;
use crate::launcher::ProcessConfig;
use crate::prediction::PredictorConfig;

#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The encoder's files; `None` with a decoder engine (its GGUF holds everything).
    pub model: Option<ModelFiles>,
    /// `None`: as the model directory says (sentence-transformers' pooling config), else mean.
    pub pooling: Option<Pooling>,
    pub engine: EngineKind,
    /// Runtimes for policies that do not choose their own.
    pub runtimes: Vec<RuntimeSpec>,
    /// Instances of each runtime (of each stage); for policies that choose their own runtimes,
    /// the total.
    pub instances: usize,
    /// Pipeline stages each runtime's encoder is cut into (1: the whole model).
    pub stages: u16,
    /// Intra-op threads of each instance of `runtimes` (`None`: the engine's default, every
    /// core).
    pub threads: Option<u16>,
    /// The scheduling policy by name (see `morph_policy::registry`), its parameters (JSON
    /// object) and what it may take from the deployment (profile, SLO).
    pub policy: String,
    pub policy_params: serde_json::Value,
    pub policy_context: Context,
    pub api_key: Option<String>,
    /// The model's name in the API (`model` fields, `/v1/models`); `None`: the model's own.
    pub served_model_name: Option<String>,
    /// Most inputs (embeddings) or prompts (completions) in one call.
    pub max_client_batch: usize,
    /// Most of one call's inputs handed to the policy at once: a larger call goes in waves, each
    /// once the last is answered, so that it fits the policy's queue.
    pub call_wave: usize,
    /// Generation: predicted output lengths for the scheduler (SSJF).
    pub predictor: PredictorConfig,
    /// Deadlines and caps for client connections.
    pub limits: ConnectionLimits,
    /// Encoder replicas as `morph worker` processes (`None`: threads of this process).
    pub workers: Option<ProcessConfig>,
    /// Pipeline policies: the tokens of the one request each stage is timed on at start-up.
    pub stage_timing_len: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Policy(#[from] registry::PolicyError),
    #[error("{0}")]
    Config(String),
}
