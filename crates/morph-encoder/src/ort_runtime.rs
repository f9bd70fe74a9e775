//! The ONNX Runtime engine. An [`OrtEncoder`] holds the model once (the host-memory copy every
//! runtime is compiled from); each [`OrtRuntime`] is one ONNX Runtime session, optimised at the
//! highest level when it is created, of either the graph Morph writes for the runtime's shape
//! from the checkpoint (every dimension fixed for a fixed runtime, free for a dynamic one) or a
//! user's ONNX file with its free dimensions pinned to the runtime's shape.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use morph_core::{RuntimeSpec, ShapeKind, TokenPlan, UnitSpec};
use ort::environment::Environment;
use ort::session::Session;
use ort::value::Tensor;

use crate::architecture::BertConfig;
use crate::calibration::calibrate;
use crate::checkpoint::Checkpoint;
use crate::onnx::{
    ATTENTION_MASK, Dtype, GraphOutput, GraphSpec, HIDDEN_IN, HIDDEN_OUT, INPUT_IDS, POOLED, PROMPT_IN,
    Precision, PreparedProducts, encoder_graph_reusing,
};
use crate::ort_session::{Optimise, build_session, environment, session};
use crate::pooling::{Pool, Pooling};
use crate::tasks::{prompts::BUILTIN_ENCODER, prompts::TaskPrompts};
use crate::tokenize::TextTokenizer;
use morph_engine::{BatchInput, Engine, EngineError, StartTimes, check_lengths};
use morph_fetch::ModelFiles;

/// Input of graphs that embed two segments (user files; Morph's graphs embed one).
const TOKEN_TYPE_IDS: &str = "token_type_ids";

fn ort_err(context: &str) -> impl Fn(ort::Error) -> EngineError + '_ {
    move |e| EngineError::Inference(format!("{context}: {e}"))
}

/// Padded tokens above which a batch gives the memory it took back: ONNX Runtime's CPU arena
/// keeps what a run allocated for the next (fast for batches like the last), so without this
/// one 32 × 512-token call left the server 1.2 GB larger for good.
const SHRINK_ABOVE_TOKENS: usize = 8 * 512;

/// Run options that shrink the CPU arena at the end of a run of `tokens` padded tokens, if that
/// many are above [`SHRINK_ABOVE_TOKENS`].
fn shrink_after(tokens: usize) -> Result<Option<ort::session::RunOptions>, EngineError> {
    if tokens <= SHRINK_ABOVE_TOKENS {
        return Ok(None);
    }
    let mut options = ort::session::RunOptions::new().map_err(ort_err("run options"))?;
    options.set("memory.enable_memory_arena_shrinkage", "cpu:0").map_err(ort_err("run options"))?;
    Ok(Some(options))
}

/// Where a prepared artefact keeps token plan `plan`'s optimised graph.
fn prepared_graph(dir: &Path, plan: TokenPlan) -> PathBuf {
    dir.join(format!("plan-{plan}.ort"))
}

/// The prepared graph at `path`, mapped into memory for the rest of the process (a worker
/// hosts one replica and runs on these bytes in place: its session reads the weights from
/// them, so nothing is copied and the host cache's pages are shared, not duplicated).
fn map_prepared(path: &Path) -> std::io::Result<&'static [u8]> {
    Ok(Box::leak(Box::new(morph_engine::map_prepared(path)?)))
}

/// Intra-op threads per session: every core (sessions run one batch at a time each).
fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// What a session computes from, and what it hands back.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Io {
    /// The graph takes `token_type_ids` (all zeros: one segment).
    token_types: bool,
    output: Output,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Output {
    /// `[batch, hidden]`, pooled in the graph.
    Pooled(String),
    /// `[batch, len, hidden]`, pooled here.
    Hidden(String, Pooling),
    /// `[batch, len, hidden]`, handed on to the next pipeline stage as each row's tokens.
    HandOn,
}

/// Where the runtimes' graphs come from.
#[derive(Debug)]
enum Source {
    /// Morph writes a graph per runtime from the checkpoint, its weight products in `precision`
    /// (int8 calibrated with the model's `tokenizer`, its `products` prepared once for all).
    Written {
        checkpoint: Checkpoint,
        pooling: Pooling,
        precision: Precision,
        tokenizer: PathBuf,
        products: PreparedProducts,
    },
    /// A user's ONNX file; its free dimensions (batch, sequence) are pinned per runtime.
    File { bytes: Vec<u8>, io: Io, batch: Option<String>, sequence: Option<String> },
}

/// A model ready to be compiled into runtimes.
#[derive(Debug)]
pub struct OrtEncoder {
    source: Source,
    dim: usize,
    pad: u32,
    max_positions: usize,
    env: &'static Environment,
    /// The trained prompts prompt plans take (Morph's own, for the model they were trained on).
    prompts: Option<Arc<TaskPrompts>>,
}

impl OrtEncoder {
    /// Loads the model's weights (Morph writes the graphs) and the ONNX Runtime library.
    pub fn load(files: &ModelFiles, pooling: Pooling, library: &Path) -> Result<Self, EngineError> {
        let env = environment(library)?;
        let checkpoint = Checkpoint::load(files)?;
        let cfg = &checkpoint.config;
        let (dim, pad, max_positions) = (cfg.hidden_size, cfg.pad_token_id, cfg.max_position_embeddings);
        let prompts = files
            .dir
            .file_name()
            .is_some_and(|n| n == BUILTIN_ENCODER)
            .then(TaskPrompts::builtin)
            .transpose()?;
        let tokenizer = files.tokenizer.clone();
        let products = PreparedProducts::default();
        let source = Source::Written { checkpoint, pooling, precision: Precision::Fp32, tokenizer, products };
        Ok(Self { source, dim, pad, max_positions, env, prompts })
    }

    /// This encoder with its weight matrix products in `dtype` (int8: ONNX Runtime's
    /// dynamically quantised kernels, calibrated here on a few dozen sentences); only for the
    /// graphs Morph writes.
    pub fn with_dtype(mut self, dtype: Dtype) -> Result<Self, EngineError> {
        match &mut self.source {
            Source::Written { precision, .. } if precision.dtype() == dtype => {}
            Source::Written { checkpoint, precision, tokenizer, .. } => {
                *precision = match dtype {
                    Dtype::Fp32 => Precision::Fp32,
                    Dtype::Int8 => {
                        let outliers = calibrate(self.env, checkpoint, &TextTokenizer::load(tokenizer)?)?;
                        Precision::Int8(Arc::new(outliers))
                    }
                };
            }
            Source::File { .. } if dtype != Dtype::Fp32 => {
                return Err(EngineError::Unsupported(format!(
                    "--dtype {dtype} quantises the graph Morph writes; a user's --onnx file runs as it is"
                )));
            }
            Source::File { .. } => {}
        }
        Ok(self)
    }

    /// Loads a user's ONNX file (inputs `input_ids`, `attention_mask`, optionally
    /// `token_type_ids`; output `sentence_embedding` `[batch, hidden]` or `last_hidden_state`
    /// `[batch, len, hidden]`, pooled with `pooling`), such as a hub repository's
    /// `onnx/model.onnx` or a graph Morph wrote. The model directory's `config.json`
    /// gives the padding id and the positions.
    pub fn load_file(
        files: &ModelFiles,
        onnx: &Path,
        pooling: Pooling,
        library: &Path,
    ) -> Result<Self, EngineError> {
        let env = environment(library)?;
        let bytes = std::fs::read(onnx).map_err(|e| EngineError::Load(format!("{}: {e}", onnx.display())))?;
        let cfg = BertConfig::read(files)?;
        let probe = session(env, &bytes, 1, &[])?;
        let bad = |detail: String| EngineError::Load(format!("{}: {detail}", onnx.display()));
        let input = |name: &str| probe.inputs().iter().find(|i| i.name() == name);
        let ids = input(INPUT_IDS).ok_or_else(|| bad(format!("no input named {INPUT_IDS}")))?;
        if input(ATTENTION_MASK).is_none() {
            return Err(bad(format!("no input named {ATTENTION_MASK}")));
        }
        let free = |axis: usize| match ids.dtype() {
            ort::value::ValueType::Tensor { shape, dimension_symbols, .. }
                if shape.get(axis) == Some(&-1) =>
            {
                dimension_symbols.get(axis).filter(|s| !s.is_empty()).cloned()
            }
            _ => None,
        };
        let output = |name: &str| probe.outputs().iter().find(|o| o.name() == name);
        let (output, dim) = if let Some(o) = output(POOLED) {
            (Output::Pooled(POOLED.into()), last_dim(o.dtype()))
        } else if let Some(o) = output(HIDDEN_OUT) {
            (Output::Hidden(HIDDEN_OUT.into(), pooling), last_dim(o.dtype()))
        } else {
            return Err(bad(format!("no output named {POOLED} or {HIDDEN_OUT}")));
        };
        let dim = dim.ok_or_else(|| bad("the output's hidden size is not fixed".into()))?;
        let io = Io { token_types: input(TOKEN_TYPE_IDS).is_some(), output };
        let (batch, sequence) = (free(0), free(1));
        let source = Source::File { bytes, io, batch, sequence };
        let max_positions = cfg.max_position_embeddings;
        Ok(Self { source, dim, pad: cfg.pad_token_id, max_positions, env, prompts: None })
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Encoder layers of a graph Morph writes (`None` for a user's ONNX file).
    pub fn layers(&self) -> Option<usize> {
        match &self.source {
            Source::Written { checkpoint, .. } => Some(checkpoint.config.num_hidden_layers),
            Source::File { .. } => None,
        }
    }

    /// Compiles one instance of `spec`: the whole model, plain, on every core.
    pub fn runtime(&self, spec: RuntimeSpec) -> Result<OrtRuntime, EngineError> {
        self.instance(UnitSpec::batch(spec), &[TokenPlan::Plain])
    }

    /// Compiles one instance of `unit` (a layer range when it is a pipeline stage, with its
    /// thread count) with a session per token plan in `plans` ([`morph_core::TokenPlan`]: plain,
    /// ToMe merging, early exits, pruning, prompts). Prompt plans (γ > 0) need trained prompts.
    pub fn instance(&self, unit: UnitSpec, plans: &[TokenPlan]) -> Result<OrtRuntime, EngineError> {
        self.compile(unit, plans, None).map(|(runtime, _)| runtime)
    }

    /// Compiles like [`OrtEncoder::instance`], saving each plan's optimised graph under
    /// `prepare` (a prepared artefact [`OrtRuntime::load_prepared`] starts from), and says how
    /// long writing the graphs and setting up the sessions took.
    pub fn compile(
        &self,
        unit: UnitSpec,
        plans: &[TokenPlan],
        prepare: Option<&Path>,
    ) -> Result<(OrtRuntime, StartTimes), EngineError> {
        let spec = unit.runtime;
        if spec.longest_taken() as usize > self.max_positions {
            let detail = format!("the model has {} positions", self.max_positions);
            return Err(EngineError::Shape { runtime: spec, detail });
        }
        // A fixed shape is pinned in the session. With a dynamic fallback the session stays
        // unpinned (no second, pinned session is built): the batches that fit are still padded
        // to the shape ([`RuntimeSpec::padded_shape`]), the longer ones run at their length.
        let fixed = spec.kind == ShapeKind::Fixed && spec.fallback_len == 0;
        let threads = unit_threads(unit);
        let mut times = StartTimes::default();
        let mut sessions = Vec::with_capacity(plans.len());
        let (mut io, mut takes_hidden) = (None, false);
        for &plan in plans {
            let layers = self.layers().unwrap_or(0);
            let (merge, exit, deep_prompts, prune) = match plan
                .check_depth(layers)
                .map_err(|e| EngineError::Unsupported(e.to_string()))?
            {
                TokenPlan::Plain => (0, None, None, None),
                TokenPlan::Merge(r) => (r, None, None, None),
                TokenPlan::Prune { .. } if unit.stage.is_some() => {
                    return Err(EngineError::Unsupported("a pruning plan on a pipeline stage".into()));
                }
                TokenPlan::Prune { after, percent } => (0, None, None, Some((after, percent))),
                TokenPlan::Exit(_) if unit.stage.is_some() => {
                    return Err(EngineError::Unsupported("an exit plan on a pipeline stage".into()));
                }
                TokenPlan::Exit(k) => (0, Some(k), None, None),
                TokenPlan::Prompt(..) if unit.stage.is_some() => {
                    return Err(EngineError::Unsupported("a prompt plan on a pipeline stage".into()));
                }
                TokenPlan::Prompt(p, mode) => match &self.prompts {
                    Some(prompts) if prompts.has_plan(plan) => (0, None, Some((p, mode)), None),
                    _ => {
                        return Err(EngineError::Unsupported(format!(
                            "token plan {plan}: no trained prompts for it (Morph ships prompts for {BUILTIN_ENCODER})"
                        )));
                    }
                },
            };
            let save_to = prepare.map(|dir| prepared_graph(dir, plan));
            let optimise = Optimise::All { save_to: save_to.as_deref() };
            let (session, plan_io) = match &self.source {
                Source::Written { checkpoint, pooling, precision, products, .. } => {
                    let built = Instant::now();
                    let layers = checkpoint.config.num_hidden_layers;
                    let range = unit.stage.map_or(0..exit.unwrap_or(layers), |s| {
                        usize::from(s.first_layer)..usize::from(s.end_layer)
                    });
                    let hands_on = range.end < layers && exit.is_none();
                    takes_hidden = range.start > 0;
                    let output = if hands_on { GraphOutput::Hidden } else { GraphOutput::Pooled(*pooling) };
                    let shape = fixed.then_some((spec.max_batch, spec.max_len));
                    let graph_spec = GraphSpec {
                        shape,
                        layers: range,
                        prompt: Vec::new(),
                        merge,
                        deep_prompts,
                        prune,
                        output,
                        precision: precision.clone(),
                        remove_padding: true,
                    };
                    let bytes = encoder_graph_reusing(checkpoint, &graph_spec, products)?.to_model_bytes();
                    times.build += built.elapsed();
                    let started = Instant::now();
                    let session = build_session(self.env, &bytes, threads, &[], optimise)?;
                    times.session += started.elapsed();
                    (session, Io::written(hands_on))
                }
                Source::File { .. } if plan != TokenPlan::Plain || unit.stage.is_some() => {
                    return Err(EngineError::Unsupported(
                        "token plans and pipeline stages need the graph Morph writes, not --onnx".into(),
                    ));
                }
                Source::File { bytes, io, batch, sequence } => {
                    let pinned: Vec<(String, i64)> = [(batch, spec.max_batch), (sequence, spec.max_len)]
                        .into_iter()
                        .filter(|_| fixed)
                        .filter_map(|(name, size)| name.clone().map(|n| (n, i64::from(size))))
                        .collect();
                    let started = Instant::now();
                    let session = build_session(self.env, bytes, threads, &pinned, optimise)?;
                    times.session += started.elapsed();
                    (session, io.clone())
                }
            };
            io = Some(plan_io);
            sessions.push((plan, session));
        }
        let io = io.ok_or_else(|| EngineError::Load("an instance needs at least one token plan".into()))?;
        let prompts = self.prompts.clone();
        let written = matches!(self.source, Source::Written { .. });
        let runtime =
            OrtRuntime { sessions, spec, dim: self.dim, pad: self.pad, io, takes_hidden, prompts, written };
        Ok((runtime, times))
    }

    /// Padding token id of the model.
    pub fn pad(&self) -> u32 {
        self.pad
    }
}

/// Intra-op threads of an instance of `unit`: its own count, or every core.
fn unit_threads(unit: UnitSpec) -> usize {
    unit.threads.map_or_else(default_threads, usize::from)
}

impl Io {
    /// A graph Morph writes: it hands hidden states on, or pools in the graph.
    fn written(hands_on: bool) -> Self {
        let output = if hands_on { Output::HandOn } else { Output::Pooled(POOLED.into()) };
        Io { token_types: false, output }
    }
}

impl OrtRuntime {
    /// An instance of `unit` from the artefact [`OrtEncoder::compile`] prepared under `dir`
    /// (Morph's own graphs, already optimised, so optimisation is off): no weights read from
    /// disk, no graph written. `dim` and `pad` are the model's hidden size and padding id.
    pub fn load_prepared(
        library: &Path,
        dir: &Path,
        unit: UnitSpec,
        plans: &[TokenPlan],
        (dim, pad): (usize, u32),
    ) -> Result<(OrtRuntime, StartTimes), EngineError> {
        let loaded = Instant::now();
        let env = environment(library)?;
        let mut times = StartTimes { library: loaded.elapsed(), ..StartTimes::default() };
        let mut sessions = Vec::with_capacity(plans.len());
        for &plan in plans {
            let read = Instant::now();
            let path = prepared_graph(dir, plan);
            let bytes = map_prepared(&path)
                .map_err(|e| EngineError::Load(format!("prepared graph {}: {e}", path.display())))?;
            times.read += read.elapsed();
            let started = Instant::now();
            sessions.push((plan, build_session(env, bytes, unit_threads(unit), &[], Optimise::Off)?));
            times.session += started.elapsed();
        }
        let hands_on = unit.stage.is_some_and(|s| s.index + 1 < s.count);
        let takes_hidden = unit.stage.is_some_and(|s| s.index > 0);
        let io = Io::written(hands_on);
        // Prompt plans were compiled for the model Morph's prompts were trained on.
        let prompted = plans.iter().any(|p| matches!(p, TokenPlan::Prompt(..)));
        let prompts = if prompted { Some(TaskPrompts::builtin()?) } else { None };
        let spec = unit.runtime;
        Ok((OrtRuntime { sessions, spec, dim, pad, io, takes_hidden, prompts, written: true }, times))
    }
}

/// The size of a tensor type's last dimension, if it is fixed.
fn last_dim(t: &ort::value::ValueType) -> Option<usize> {
    t.tensor_shape().and_then(|s| s.last().copied()).and_then(|d| usize::try_from(d).ok())
}

/// One instance of a unit: an ONNX Runtime session per token plan.
#[derive(Debug)]
pub struct OrtRuntime {
    sessions: Vec<(TokenPlan, Session)>,
    spec: RuntimeSpec,
    dim: usize,
    pad: u32,
    io: Io,
    /// A pipeline stage past the first: it takes hidden states, not token ids.
    takes_hidden: bool,
    prompts: Option<Arc<TaskPrompts>>,
    /// Morph's own graph (it removes the padding under the plans that keep every token in
    /// place), not a user's `--onnx` file.
    written: bool,
}

impl Engine for OrtRuntime {
    fn runtime(&self) -> RuntimeSpec {
        self.spec
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn packs(&self, plan: TokenPlan) -> bool {
        self.written && plan.keeps_tokens_in_place()
    }

    fn run(&mut self, input: BatchInput<'_>, plan: TokenPlan) -> Result<Vec<Vec<f32>>, EngineError> {
        let dim = self.dim;
        let lens = input.lens(dim);
        let longest = check_lengths(self.spec, &lens)?;
        let shape = self.spec.padded_shape(longest, lens.len() as u32);
        let (rows, len) = (shape.batch as usize, shape.len as usize);
        let mut mask = vec![0i64; rows * len];
        for (r, n) in lens.iter().enumerate() {
            mask[r * len..r * len + n].fill(1);
        }
        let ids_tensor =
            |what, data: Vec<i64>| Tensor::from_array(([rows, len], data)).map_err(ort_err(what));
        let mut feed = ort::inputs![ATTENTION_MASK => ids_tensor("mask", mask.clone())?];
        match (input, self.takes_hidden) {
            (BatchInput::Tokens(inputs) | BatchInput::Tasked(inputs, _), false) => {
                let (ids, _) = padded_ids(inputs, rows, len, self.pad);
                feed.push((INPUT_IDS.into(), ids_tensor("input ids", ids)?.into()));
                if self.io.token_types {
                    feed.push((
                        TOKEN_TYPE_IDS.into(),
                        ids_tensor("token types", vec![0; rows * len])?.into(),
                    ));
                }
            }
            (BatchInput::Hidden(states), true) => {
                let mut hidden = vec![0f32; rows * len * dim];
                for (r, state) in states.iter().enumerate() {
                    hidden[r * len * dim..r * len * dim + state.len()].copy_from_slice(state);
                }
                let tensor =
                    Tensor::from_array(([rows, len, dim], hidden)).map_err(ort_err("hidden states"))?;
                feed.push((HIDDEN_IN.into(), tensor.into()));
            }
            (BatchInput::Tokens(_) | BatchInput::Tasked(..), true) => {
                return Err(EngineError::Unsupported("token ids on a pipeline stage past the first".into()));
            }
            (BatchInput::Hidden(_), false) => {
                return Err(EngineError::Unsupported("hidden states on a first stage or whole model".into()));
            }
        }
        let session = match self.sessions.iter_mut().find(|(p, _)| *p == plan) {
            Some((_, session)) => session,
            None => return Err(EngineError::Unsupported(format!("token plan {plan} on this instance"))),
        };
        if session.inputs().iter().any(|i| i.name() == PROMPT_IN) {
            let (BatchInput::Tasked(_, tasks), Some(prompts)) = (input, &self.prompts) else {
                return Err(EngineError::Unsupported(format!("token plan {plan} needs each row's task")));
            };
            let (values, layers, p) = prompts.gather(plan, tasks, rows)?;
            let tensor = Tensor::from_array(([rows, layers, p, dim], values)).map_err(ort_err("prompts"))?;
            feed.push((PROMPT_IN.into(), tensor.into()));
        }
        let shrink = shrink_after(rows * len)?;
        let outputs = match &shrink {
            Some(options) => session.run_with_options(feed, options),
            None => session.run(feed),
        }
        .map_err(ort_err("run"))?;
        let extract = |name: &str| outputs[name].try_extract_tensor::<f32>().map_err(ort_err("output"));
        let vectors = match &self.io.output {
            Output::Pooled(name) => {
                let (_, pooled) = extract(name)?;
                pooled.chunks_exact(dim).take(lens.len()).map(<[f32]>::to_vec).collect()
            }
            Output::Hidden(name, pooling) => {
                let (_, hidden) = extract(name)?;
                (0..lens.len())
                    .map(|r| {
                        let rows = &hidden[r * len * dim..(r + 1) * len * dim];
                        pooling.apply_rows(rows, &mask[r * len..(r + 1) * len], dim)
                    })
                    .collect()
            }
            Output::HandOn => {
                let (_, hidden) = extract(HIDDEN_OUT)?;
                lens.iter()
                    .enumerate()
                    .map(|(r, n)| hidden[r * len * dim..r * len * dim + n * dim].to_vec())
                    .collect()
            }
        };
        Ok(vectors)
    }
}

/// `inputs` laid out as `rows × len` int64 ids (padded with `pad`) and their 1/0 mask.
pub fn padded_ids(inputs: &[Vec<u32>], rows: usize, len: usize, pad: u32) -> (Vec<i64>, Vec<i64>) {
    let mut ids = vec![i64::from(pad); rows * len];
    let mut mask = vec![0i64; rows * len];
    for (r, seq) in inputs.iter().enumerate() {
        for (slot, &id) in ids[r * len..].iter_mut().zip(seq) {
            *slot = i64::from(id);
        }
        mask[r * len..r * len + seq.len()].fill(1);
    }
    (ids, mask)
}
