//! What a server is built from ([`Deployment`]: every choice resolved, by `morph_deploy` from
//! what `morph serve` was asked, or by hand in a test), and why one cannot be built
//! ([`BuildError`]).

use std::sync::Arc;

use morph_backend::{Backend, EngineKind};
use morph_core::RuntimeSpec;
use morph_encoder::Pooling;
use morph_encoder::tasks::served::TaskHeads;
use morph_engine::{CoreShare, EngineError};
use morph_fetch::ModelFiles;
use morph_policy::registry::{self, Context, Family, PolicyKind};

use crate::connections::ConnectionLimits;
use crate::launcher::ProcessConfig;
use crate::prediction::PredictorConfig;

/// A resolved deployment: the model, engine, layout, policy and limits one server runs.
#[derive(Debug, Clone)]
pub struct Deployment {
    /// The encoder's files; `None` with a decoder engine (its GGUF holds everything).
    pub model: Option<ModelFiles>,
    /// `None`: as the model directory says (sentence-transformers' pooling config), else mean.
    pub pooling: Option<Pooling>,
    /// Embeddings: the model's prompt put before every text whose call names none.
    pub default_prompt_name: Option<String>,
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
    /// The model's names in the API (`model` fields, `/v1/models`), the first in its answers;
    /// empty: the model's own.
    pub served_model_names: Vec<String>,
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
    /// The model as loaded already (to profile it on a first start), served rather than
    /// loaded again.
    pub preloaded: Option<Preloaded>,
    /// The host's cores, when this model shares them with the others of a several-model
    /// server (`None`: its instances compute whenever they have work).
    pub cores: Option<CoreShare>,
    /// Classification: the task heads to serve (`None`: the built-in ones, on their encoder).
    pub task_heads: Option<Arc<TaskHeads>>,
}

/// A backend loaded before the server was built, and the pooling it was loaded with: the
/// server takes it where it would load the same.
#[derive(Debug, Clone)]
pub struct Preloaded {
    pub pooling: Pooling,
    pub backend: Arc<Backend>,
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

/// A configuration error, one line.
fn refuse(message: impl Into<String>) -> Result<(), BuildError> {
    Err(BuildError::Config(message.into()))
}

impl Deployment {
    /// Refuses what the policy, the engine, the stages and the workers cannot run together,
    /// naming the flag: every such rule of the server, checked against the engine's declared
    /// abilities ([`morph_backend::EngineConfig::can`]) and the policy's family and needs, before anything loads.
    pub fn check(&self, kind: &PolicyKind) -> Result<(), BuildError> {
        let can = self.engine.can();
        let staged = self.stages > 1;
        if self.instances == 0 {
            return refuse("at least one instance is needed");
        }
        if staged && let Err(why) = can.stages {
            return refuse(why);
        }
        if self.engine.generates() && staged && kind.family == Family::Generation {
            return refuse(format!(
                "policy '{}' runs whole decoders; a decoder's prefill stages are batched by dynamic-batching or a pipeline policy",
                kind.name
            ));
        }
        if kind.needs.stages && self.policy_context.pipeline.is_none() {
            if self.runtimes.len() != 1 {
                return refuse(format!(
                    "policy '{}' runs one pipeline: give exactly one --runtime",
                    kind.name
                ));
            }
            if !staged {
                return refuse(format!(
                    "policy '{}' sizes pipeline stages: give --stages N (N >= 2)",
                    kind.name
                ));
            }
        }
        if self.workers.is_none() {
            return Ok(());
        }
        if self.engine.generates() && !staged {
            return refuse(
                "worker processes run a decoder's prefill stages (--stages N); whole decoders generate in threads of the server",
            );
        }
        if !kind.runs_in_worker_processes() {
            return refuse(format!(
                "policy '{}' runs its instances as threads of the server; --workers process runs with dynamic-batching or a pipeline policy",
                kind.name
            ));
        }
        match can.processes {
            false => Err(processes_refusal(&self.engine)),
            true => Ok(()),
        }
    }
}

/// What `morph worker` processes can run; the refusal of anything else.
pub const WHAT_PROCESSES_RUN: &str = "worker processes run the ONNX graphs Morph writes (--engine ort, no --onnx) or a decoder's prefill stages";

/// The refusal of worker processes for an engine they do not run.
pub(crate) fn processes_refusal(engine: &EngineKind) -> BuildError {
    BuildError::Config(format!("{WHAT_PROCESSES_RUN}, not the {} engine", engine.label()))
}

#[cfg(test)]
mod tests {
    use morph_backend::engines::{
        CandleEngine, DecoderEngine, EmulatedEngine, NO_STAGES_OF_ONNX_FILE, NO_STAGES_ON_CANDLE, OrtEngine,
    };
    use morph_core::Dtype;
    use morph_core::fixtures::flat_profile;
    use morph_decoder::{DecoderKernels, PrefillWeights, PromptCacheConfig};
    use morph_encoder::model_pooling;

    use super::*;

    /// A deployment of emulated instances on one dynamic runtime, nothing loaded.
    fn emulated() -> Deployment {
        Deployment {
            model: None,
            pooling: None,
            default_prompt_name: None,
            engine: EngineKind::new(EmulatedEngine { profile: Arc::new(flat_profile(1.0, 1)), dim: 8 }),
            runtimes: vec![RuntimeSpec::dynamic(512, 8)],
            instances: 1,
            stages: 1,
            threads: None,
            policy: "dynamic-batching".into(),
            policy_params: serde_json::json!({}),
            policy_context: Context::default(),
            api_key: None,
            served_model_names: Vec::new(),
            max_client_batch: 4,
            call_wave: 4,
            predictor: PredictorConfig::default(),
            limits: ConnectionLimits::default(),
            workers: None,
            stage_timing_len: 64,
            preloaded: None,
            cores: None,
            task_heads: None,
        }
    }

    fn workers() -> Option<ProcessConfig> {
        Some(ProcessConfig {
            exe: "morph".into(),
            cache: None,
            parked: 0,
            start_timeout: std::time::Duration::from_secs(1),
            batch_timeout: std::time::Duration::from_secs(1),
            remote: None,
        })
    }

    fn refusal(d: Deployment, policy: &str) -> String {
        match d.check(PolicyKind::find(policy).unwrap()) {
            Ok(()) => "accepted".into(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn what_cannot_run_together_is_refused_by_the_engines_abilities_and_the_policys_family() {
        let ort = |onnx: Option<&str>, dtype| {
            EngineKind::new(OrtEngine {
                library: "libonnxruntime.so".into(),
                onnx: onnx.map(Into::into),
                plans: Vec::new(),
                dtype,
            })
        };
        let decoder = |kernels| {
            EngineKind::new(DecoderEngine {
                gguf: "m.gguf".into(),
                prefill_chunk: 256,
                batch_threads: None,
                kernels,
                chat_template: None,
                prompt_cache: PromptCacheConfig::OFF,
                prefill: PrefillWeights::default(),
            })
        };
        assert_eq!(refusal(emulated(), "dynamic-batching"), "accepted");
        assert_eq!(
            refusal(Deployment { instances: 0, ..emulated() }, "dynamic-batching"),
            "at least one instance is needed"
        );
        let candle_stages = Deployment { engine: EngineKind::new(CandleEngine), stages: 2, ..emulated() };
        assert_eq!(refusal(candle_stages, "dynamic-batching"), NO_STAGES_ON_CANDLE);
        let file_stages = Deployment { engine: ort(Some("m.onnx"), Dtype::Fp32), stages: 2, ..emulated() };
        assert_eq!(refusal(file_stages, "dynamic-batching"), NO_STAGES_OF_ONNX_FILE);
        let llama_stages = Deployment { engine: decoder(DecoderKernels::LlamaCpp), stages: 5, ..emulated() };
        assert!(refusal(llama_stages, "dynamic-batching").contains("run on candle"));
        let whole_in_stages = Deployment { engine: decoder(DecoderKernels::Candle), stages: 5, ..emulated() };
        assert!(refusal(whole_in_stages.clone(), "fcfs").contains("runs whole decoders"));
        assert_eq!(refusal(whole_in_stages, "dynamic-batching"), "accepted");
        let two_runtimes = vec![RuntimeSpec::dynamic(64, 4), RuntimeSpec::dynamic(128, 4)];
        let pipeline = Deployment { runtimes: two_runtimes, stages: 2, ..emulated() };
        assert!(refusal(pipeline, "quart").contains("give exactly one --runtime"));
        assert!(refusal(emulated(), "quart").contains("give --stages N"));
        // Worker processes: a whole decoder, a policy of threads, an engine they do not run.
        let whole =
            Deployment { engine: decoder(DecoderKernels::LlamaCpp), workers: workers(), ..emulated() };
        assert!(refusal(whole, "fcfs").contains("whole decoders generate in threads"));
        let in_processes = Deployment { engine: ort(None, Dtype::Fp32), workers: workers(), ..emulated() };
        assert!(
            refusal(in_processes.clone(), "arlo").contains("--workers process runs with dynamic-batching")
        );
        assert_eq!(refusal(in_processes.clone(), "dynamic-batching"), "accepted");
        let int8 = Deployment { engine: ort(None, Dtype::Int8), ..in_processes.clone() };
        assert_eq!(refusal(int8, "dynamic-batching"), "accepted", "int8 graphs run in workers too");
        let emulated_processes = Deployment { workers: workers(), ..emulated() };
        assert!(refusal(emulated_processes, "dynamic-batching").contains(WHAT_PROCESSES_RUN));
    }

    #[test]
    fn a_model_loaded_to_profile_it_is_served_unless_the_server_would_load_it_otherwise() {
        let files =
            morph_fetch::fetch_default(&morph_fetch::morph_home(), &morph_fetch::Pip::from_env()).unwrap();
        let pooling = model_pooling(&files.dir).unwrap();
        let backend = Arc::new(EngineKind::new(CandleEngine).load(Some((&files, pooling))).unwrap());
        let preloaded = Some(Preloaded { pooling, backend: backend.clone() });
        let config =
            Deployment { model: Some(files), engine: EngineKind::new(CandleEngine), preloaded, ..emulated() };
        let served = |config: &Deployment| crate::build::load(config).unwrap().launcher;
        assert!(std::ptr::eq(served(&config).backend(), &*backend), "loaded again");
        let other = if pooling == Pooling::Cls { Pooling::Mean } else { Pooling::Cls };
        let repooled = Deployment { pooling: Some(other), ..config };
        assert!(!std::ptr::eq(served(&repooled).backend(), &*backend), "served with the wrong pooling");
    }
}
