//! [`ServeSpec::resolve`]: the defaults applied, the model fetched, the engine and predictor
//! chosen, the runtimes read off the host's profile where none were given, and the policy's
//! limits filled into its parameters where it left them out.

use std::sync::Arc;

use anyhow::Context;
use morph_backend::EngineKind;
use morph_backend::engines::{DecoderEngine, OrtEngine};
use morph_core::{LatencyProfile, RuntimeSpec, TokenPlan, time::ms_to_nanos};
use morph_decoder::DecoderKernels;
use morph_encoder::tasks::served::TaskHeads;
use morph_fetch::ModelFiles;
use morph_policy::registry::{self, Family, PolicyKind};
use morph_server::prediction::PredictorConfig;
use morph_server::{Deployment, StartupSteps};

use crate::defaults::{ServeDefaults, Wanted, fastest, refits_kept_in, serve_defaults};
use crate::prompt_cache::prompt_cache;
use crate::spec::{MaxQueue, ServeSpec, Task};

/// Most of one call's inputs in the queue at once (a larger call goes in waves of half the
/// queue, at most this many).
const MAX_CALL_WAVE: usize = 128;

/// The longest input the profiled default runtime takes (the default encoder's 512 positions).
const PROFILED_MAX_LEN: u32 = 512;

/// Batches served between refits of buckets planned from a profile fitted on a first start:
/// a few seconds of traffic at this host's rates.
const REFINE_EVERY: u32 = 512;

impl ServeSpec {
    /// The deployment this spec asks for; each slow step (fetching, profiling) is told to
    /// `steps`.
    pub fn resolve(self, steps: &StartupSteps) -> anyhow::Result<Deployment> {
        self.check()?;
        let profile = match &self.profile {
            Some(path) => Some(Arc::new(LatencyProfile::load(path)?)),
            None => None,
        };
        let policy = self.policy.as_deref().unwrap_or(match self.whole_decoder() {
            true => "fcfs",
            false => "dynamic-batching",
        });
        let policy = PolicyKind::find(policy)?;
        let (model, engine, predictor) = match self.task {
            Task::Generate => {
                self.check_predictor_engine(policy)?;
                steps.step("fetching the model");
                (None, self.decoder()?, self.predictor.resolve(policy, || self.engine.real())?)
            }
            Task::Embed => {
                let engine = self.engine.serving(profile.clone(), self.emulated_dim)?;
                steps.step("fetching the model");
                (Some(self.model.fetch()?), engine, PredictorConfig::None)
            }
        };
        let (engine, profiled) = match &model {
            Some(files) if self.profiled_defaults(policy, &engine) => {
                let (engine, d) = self.profiled(files, engine, steps)?;
                tracing::info!(
                    runtime = %d.runtime, instances = d.instances, threads = d.threads,
                    sequences_per_s = format!("{:.0}", d.rate), profile = %d.source, engine = engine.label(),
                    "runtimes from the engine's profile"
                );
                (engine, Some(d))
            }
            _ => (engine, None),
        };
        let (runtimes, instances, threads) = match &profiled {
            Some(d) => (vec![d.runtime], d.instances, Some(d.threads)),
            None => {
                let runtimes = match (self.runtimes.is_empty(), self.task) {
                    (false, _) => self.runtimes.clone(),
                    (true, Task::Embed) => vec![RuntimeSpec::dynamic(512, 32)],
                    (true, Task::Generate) => vec![RuntimeSpec::dynamic(2048, 4)],
                };
                (runtimes, self.instances.unwrap_or(1), self.threads)
            }
        };
        let max_queue = self.max_queue.unwrap_or(MaxQueue::default_for(self.task));
        let policy_params = self.policy_params(policy, max_queue, profiled.as_ref())?;
        let (plans, accuracy) = match &self.plan_profiles {
            Some(dir) => crate::plan_profiles::load(dir)?,
            None => Default::default(),
        };
        Ok(Deployment {
            model,
            pooling: self.pooling,
            default_prompt_name: self.default_prompt_name,
            engine,
            runtimes,
            instances,
            stages: self.stages,
            threads,
            policy: policy.name.to_string(),
            policy_params,
            policy_context: registry::Context {
                profile: profile.or_else(|| plans.get(&TokenPlan::Plain).cloned()).or_else(|| {
                    profiled.as_ref().filter(|d| d.fitted()).map(|d| Arc::new(d.profile.clone()))
                }),
                // The writer is detached: it ends with the policy that holds the sink.
                refits: match profiled.as_ref().and_then(|d| d.refits_file.clone()) {
                    Some(path) => Some(refits_kept_in(path)?.0),
                    None => None,
                },
                slo: self.slo_ms.map(ms_to_nanos),
                deadline: self.deadline_ms.map(ms_to_nanos),
                plans,
                accuracy,
                ..Default::default()
            },
            api_key: self.api_key,
            served_model_names: self.served_model_names,
            max_client_batch: self.max_client_batch,
            call_wave: (max_queue / 2).clamp(1, MAX_CALL_WAVE),
            predictor,
            workers: self.workers,
            stage_timing_len: self.stage_profile_len,
            limits: self.limits,
            preloaded: profiled.and_then(|d| d.preloaded),
            task_heads: match &self.task_heads {
                Some(dir) => Some(Arc::new(
                    TaskHeads::from_dir(dir).with_context(|| format!("--task-heads {}", dir.display()))?,
                )),
                None => None,
            },
            cores: None,
        })
    }

    /// The decoder engine: its GGUF fetched, llama.cpp's kernels for a whole decoder and
    /// candle's for prefill stages unless asked otherwise.
    fn decoder(&self) -> anyhow::Result<EngineKind> {
        let chat_template = match &self.chat_template {
            Some(path) => Some(
                std::fs::read_to_string(path)
                    .with_context(|| format!("--chat-template {}", path.display()))?,
            ),
            None => None,
        };
        let kernels = self.decoder_kernels.unwrap_or(match self.whole_decoder() {
            true => DecoderKernels::LlamaCpp,
            false => DecoderKernels::Candle,
        });
        Ok(EngineKind::new(DecoderEngine {
            gguf: self.model.fetch_decoder()?,
            prefill_chunk: self.prefill_chunk,
            batch_threads: self.batch_threads,
            kernels,
            chat_template,
            prompt_cache: prompt_cache(self.prompt_cache_mib, self.prompt_cache_reuse, kernels)?,
            prefill: self.prefill_weights.unwrap_or_default(),
        }))
    }

    /// A generation server's length predictor runs its encoder on `--engine`: the engine's flags are
    /// refused by name where no predictor's encoder runs (the decoder's kernels are
    /// `--decoder-kernels`), and `--onnx` and `--plans` always (the predictor runs Morph's own
    /// graph of its encoder, plain).
    fn check_predictor_engine(&self, policy: &PolicyKind) -> anyhow::Result<()> {
        let own_graph = |flag| {
            anyhow::anyhow!(
                "{flag} is for an encoder's engine; --task generate's length predictor runs Morph's own graph"
            )
        };
        if self.engine.onnx.is_some() {
            return Err(own_graph("--onnx"));
        }
        if !self.engine.plans.is_empty() {
            return Err(own_graph("--plans"));
        }
        match self.engine.flag_given() {
            Some(flag) if !self.predictor.runs_encoder(policy) => anyhow::bail!(
                "{flag} sets the length predictor's encoder with --task generate, and policy '{}' runs none \
                 (a decoder's kernels are --decoder-kernels); leave {flag} out",
                policy.name
            ),
            _ => Ok(()),
        }
    }

    /// The layout `--instances` and `--threads` name, if they name one.
    fn wanted_layout(&self) -> anyhow::Result<Wanted> {
        let instances = self.instances.map(u16::try_from).transpose().context("--instances")?;
        Ok(Wanted { instances, threads: self.threads })
    }

    /// The defaults read off `engine`'s profiles; where the host leaves the dtype to
    /// measurement ([`crate::engine::EngineSpec::dtypes_to_measure`]), off each dtype's, and the
    /// engine in the dtype that serves more.
    fn profiled(
        &self,
        files: &ModelFiles,
        engine: EngineKind,
        steps: &StartupSteps,
    ) -> anyhow::Result<(EngineKind, ServeDefaults)> {
        let wanted = self.wanted_layout()?;
        let measured = self.engine.dtypes_to_measure();
        let engines = match measured.is_empty() {
            true => vec![engine],
            false => {
                measured.into_iter().map(|dtype| self.engine.serving_in(dtype)).collect::<Result<_, _>>()?
            }
        };
        let mut candidates = Vec::with_capacity(engines.len());
        for engine in engines {
            let defaults = serve_defaults(files, &engine, PROFILED_MAX_LEN, wanted, steps)?;
            candidates.push((engine, defaults));
        }
        fastest(candidates)
    }

    /// Whether the runtimes come from the engine's profile: an encoder on ONNX Runtime, whole,
    /// in threads, batched by dynamic-batching, with no runtime given.
    fn profiled_defaults(&self, policy: &PolicyKind, engine: &EngineKind) -> bool {
        self.runtimes.is_empty()
            && self.stages <= 1
            && policy.family == Family::Batching
            && self.workers.is_none()
            && engine.settings::<OrtEngine>().is_some()
    }

    /// The policy's parameters, with the queue and batch limits (and the profile's length
    /// buckets) where the policy's family takes them and the parameters leave them out.
    fn policy_params(
        &self,
        policy: &PolicyKind,
        max_queue: usize,
        profiled: Option<&ServeDefaults>,
    ) -> anyhow::Result<serde_json::Value> {
        let mut params = self.policy_params.clone();
        let Some(object) = params.as_object_mut() else { return Ok(params) };
        match policy.family {
            Family::Generation => {
                object.entry("max_queue").or_insert(max_queue.into());
            }
            Family::Batching => {
                object.entry("max_batch_tokens").or_insert(self.max_batch_tokens.into());
                object.entry("max_queue").or_insert(max_queue.into());
                if let Some(d) = profiled {
                    // Buckets the user gave are kept as given; those planned from a profile
                    // fitted on a first start are refined to the batches served.
                    if !object.contains_key("buckets") && d.fitted() {
                        object.entry("refine_every").or_insert(REFINE_EVERY.into());
                    }
                    object.entry("buckets").or_insert(serde_json::to_value(&d.buckets)?);
                }
            }
            Family::Arlo | Family::Pipeline | Family::TokenPlans => {}
        }
        Ok(params)
    }
}
