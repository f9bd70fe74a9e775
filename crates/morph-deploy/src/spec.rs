//! [`ServeSpec`]: what a server was asked to serve and how, every choice typed, the defaults not
//! yet applied (`None`, an empty list): [`ServeSpec::resolve`] applies them.

use std::path::PathBuf;

use morph_core::{RuntimeSpec, TokenPlan};
use morph_decoder::{DecoderKernels, PrefillWeights, Reuse};
use morph_encoder::Pooling;
use morph_server::ConnectionLimits;
use morph_worker::ProcessConfig;

use crate::engine::EngineSpec;
use crate::model::ModelChoice;
use crate::predictor::PredictorChoice;

/// What a server serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Task {
    /// An encoder: embeddings, tokenization and classification.
    Embed,
    /// A decoder: completions and chat completions.
    Generate,
}

/// What `morph serve` was asked (each field is the flag of the same name; see `morph serve
/// --help`).
#[derive(Debug, Clone)]
pub struct ServeSpec {
    pub task: Task,
    pub model: ModelChoice,
    pub engine: EngineSpec,
    /// Empty: read off the engine's profile for this host, or one dynamic runtime.
    pub runtimes: Vec<RuntimeSpec>,
    pub instances: Option<usize>,
    pub threads: Option<u16>,
    pub stages: u16,
    /// Generate: the most prompt tokens a generation feeds per iteration (0: no limit).
    pub prefill_chunk: usize,
    /// Generate: the threads of a step that feeds more than one token; `None`: `threads`.
    pub batch_threads: Option<u16>,
    /// Generate: a Jinja chat template in place of the GGUF's.
    pub chat_template: Option<PathBuf>,
    pub decoder_kernels: Option<DecoderKernels>,
    /// Generate: host memory for closed sequences' prompt states, MiB; `None`: the default.
    pub prompt_cache_mib: Option<u64>,
    /// Generate: how much of a kept state a prompt that starts the same way reuses; `None`:
    /// [`Reuse::Turns`].
    pub prompt_cache_reuse: Option<Reuse>,
    /// Generate on llama.cpp's kernels: the weights prompts prefill on; `None`: the default.
    pub prefill_weights: Option<PrefillWeights>,
    /// `None`: dynamic-batching to embed, fcfs to generate.
    pub policy: Option<String>,
    /// The policy's parameters (a JSON object); the limits below fill what they leave out.
    pub policy_params: serde_json::Value,
    pub slo_ms: Option<f64>,
    /// Calls that can no longer be answered this long after arrival are given up (504).
    pub deadline_ms: Option<f64>,
    pub stage_profile_len: u32,
    pub predictor: PredictorChoice,
    /// `None`: instances are threads of the server.
    pub workers: Option<ProcessConfig>,
    /// A latency profile: what emulated instances take, and what Arlo plans with.
    pub profile: Option<PathBuf>,
    /// OTAS: each token plan's latency profile and accuracy.
    pub plan_profiles: Option<PathBuf>,
    /// Classification: task heads of the user's (`morph train adapt --out DIR`); `None`: the
    /// built-in ones.
    pub task_heads: Option<PathBuf>,
    /// The output size of emulated instances.
    pub emulated_dim: usize,
    pub pooling: Option<Pooling>,
    pub default_prompt_name: Option<String>,
    /// Batching policies: most padded tokens in one batch.
    pub max_batch_tokens: u64,
    /// Most sequences waiting; `None`: [`MaxQueue::default_for`] the task.
    pub max_queue: Option<usize>,
    pub max_client_batch: usize,
    /// The model's names in the API, the first in its answers; empty: the model's own.
    pub served_model_names: Vec<String>,
    pub limits: ConnectionLimits,
    pub api_key: Option<String>,
}

/// `max_queue`'s default by task: for embed 1–3 s of work for MiniLM on 2 cores (overload is shed
/// early, the waiting calls stay well under the connection limit); for generate 16 sequences
/// (see docs/operations.md).
#[derive(Debug, Clone, Copy)]
pub struct MaxQueue;

impl MaxQueue {
    pub const EMBED: usize = 256;
    pub const GENERATE: usize = 16;

    pub fn default_for(task: Task) -> usize {
        match task {
            Task::Embed => Self::EMBED,
            Task::Generate => Self::GENERATE,
        }
    }
}

impl ServeSpec {
    /// Refuses settings that contradict each other, before anything loads.
    pub fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.max_queue != Some(0), "--max-queue must be at least 1");
        anyhow::ensure!(self.max_client_batch > 0, "--max-client-batch must be at least 1");
        anyhow::ensure!(self.stages > 0, "--stages must be at least 1");
        anyhow::ensure!(self.instances != Some(0), "--instances must be at least 1");
        anyhow::ensure!(self.limits.max_connections > 0, "--max-connections must be at least 1");
        anyhow::ensure!(
            self.chat_template.is_none() || self.task == Task::Generate,
            "--chat-template is for --task generate"
        );
        anyhow::ensure!(
            self.task_heads.is_none() || self.task == Task::Embed,
            "--task-heads is for --task embed"
        );
        if let (Some(_), Some(plan)) =
            (&self.task_heads, self.engine.plans.iter().find(|p| matches!(p, TokenPlan::Prompt(..))))
        {
            anyhow::bail!(
                "--plans {plan} serves the built-in prompts (all-MiniLM-L6-v2's), which do not go with \
                 --task-heads: leave the prompt plans out"
            );
        }
        anyhow::ensure!(
            self.prompt_cache_mib.is_none() || self.task == Task::Generate,
            "--prompt-cache-mib is for --task generate"
        );
        anyhow::ensure!(
            self.prompt_cache_reuse.is_none() || self.task == Task::Generate,
            "--prompt-cache-reuse is for --task generate"
        );
        anyhow::ensure!(
            self.batch_threads.is_none()
                || (self.whole_decoder() && self.decoder_kernels != Some(DecoderKernels::Candle)),
            "--batch-threads is for --task generate on llama.cpp kernels (a whole decoder)"
        );
        anyhow::ensure!(
            self.prefill_weights.is_none()
                || (self.whole_decoder() && self.decoder_kernels != Some(DecoderKernels::Candle)),
            "--prefill-weights is for --task generate on llama.cpp kernels (a whole decoder)"
        );
        self.engine.check()
    }

    /// Whether candle computes (a decoder, or `--engine candle`): its process settings are set
    /// before anything loads (`morph_backend::tuning`). `--engine auto` falling back to candle
    /// where ONNX Runtime cannot be had runs without them.
    pub fn runs_candle(&self) -> bool {
        self.task == Task::Generate || self.engine.engine.runs_candle
    }

    /// Whether the whole decoder generates (no prefill stages).
    pub(crate) fn whole_decoder(&self) -> bool {
        self.task == Task::Generate && self.stages <= 1
    }
}
