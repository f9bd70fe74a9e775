//! The ONNX Runtime engine. An [`OrtEncoder`] holds the checkpoint once (the host-memory copy
//! every runtime is compiled from); each [`OrtRuntime`] is one ONNX Runtime session built
//! from the graph Morph writes for its shape (every dimension fixed for a fixed runtime, free
//! for a dynamic one), optimised at the highest level when it is created.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use morph_core::{RuntimeSpec, ShapeKind};
use ort::environment::Environment;
use ort::session::Session;
use ort::session::builder::GraphOptimizationLevel;
use ort::value::Tensor;

use crate::checkpoint::Checkpoint;
use crate::fetch::ModelFiles;
use crate::onnx::{ATTENTION_MASK, GraphSpec, INPUT_IDS, POOLED, encoder_graph};
use crate::pooling::Pooling;
use crate::{Engine, EngineError, check_batch};

/// The process's one ONNX Runtime environment, and the library it was loaded from.
static ENVIRONMENT: OnceLock<Result<(PathBuf, Environment), String>> = OnceLock::new();

/// Loads the ONNX Runtime library at `library` (once per process) and returns the environment.
pub fn environment(library: &Path) -> Result<&'static Environment, EngineError> {
    let loaded = ENVIRONMENT.get_or_init(|| {
        let env = ort::init_from(library)
            .map_err(|e| format!("cannot load the ONNX Runtime library {}: {e}", library.display()))?
            .with_name("morph")
            .build()
            .map_err(|e| format!("ONNX Runtime did not start: {e}"))?;
        Ok((library.to_path_buf(), env))
    });
    match loaded {
        Ok((path, env)) if path == library => Ok(env),
        Ok((path, _)) => Err(EngineError::Load(format!(
            "ONNX Runtime is already loaded from {} in this process; cannot load {} too",
            path.display(),
            library.display()
        ))),
        Err(e) => Err(EngineError::Load(e.clone())),
    }
}

fn ort_err(context: &str) -> impl Fn(ort::Error) -> EngineError + '_ {
    move |e| EngineError::Inference(format!("{context}: {e}"))
}

/// Builds a session from a serialised ONNX model: all graph optimisations, `threads` intra-op
/// threads that sleep rather than spin between ops (instances share the cores).
pub fn session(env: &Environment, model: &[u8], threads: usize) -> Result<Session, EngineError> {
    let build = || -> ort::Result<Session> {
        Session::builder(env)?
            .with_optimization_level(GraphOptimizationLevel::All)?
            .with_intra_threads(threads)?
            .with_inter_threads(1)?
            .with_intra_op_spinning(false)?
            .commit_from_memory(model)
    };
    build().map_err(|e| EngineError::Load(format!("ONNX Runtime session: {e}")))
}

/// Intra-op threads per session: every core (sessions run one batch at a time each).
fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The checkpoint, ready to be compiled into runtimes.
#[derive(Debug)]
pub struct OrtEncoder {
    checkpoint: Checkpoint,
    pooling: Pooling,
    env: &'static Environment,
}

impl OrtEncoder {
    /// Loads the model's weights and the ONNX Runtime library at `library`.
    pub fn load(files: &ModelFiles, pooling: Pooling, library: &Path) -> Result<Self, EngineError> {
        let env = environment(library)?;
        Ok(Self { checkpoint: Checkpoint::load(files)?, pooling, env })
    }

    pub fn dim(&self) -> usize {
        self.checkpoint.config.hidden_size
    }

    /// The ONNX model of runtime `spec` (fixed dimensions for a fixed runtime).
    pub fn model_bytes(&self, spec: RuntimeSpec) -> Result<Vec<u8>, EngineError> {
        let shape = (spec.kind == ShapeKind::Fixed).then_some((spec.max_batch, spec.max_len));
        let layers = self.checkpoint.config.num_hidden_layers;
        let graph = encoder_graph(&self.checkpoint, &GraphSpec::pooled(shape, self.pooling, layers))?;
        Ok(graph.to_model_bytes())
    }

    /// Compiles one instance of `spec`.
    pub fn runtime(&self, spec: RuntimeSpec) -> Result<OrtRuntime, EngineError> {
        let positions = self.checkpoint.config.max_position_embeddings;
        if spec.max_len as usize > positions {
            return Err(EngineError::Shape { runtime: spec, detail: format!("the model has {positions} positions") });
        }
        let session = session(self.env, &self.model_bytes(spec)?, default_threads())?;
        Ok(OrtRuntime { session, spec, dim: self.dim(), pad: self.checkpoint.config.pad_token_id })
    }
}

/// One instance of a runtime: an ONNX Runtime session of Morph's graph.
#[derive(Debug)]
pub struct OrtRuntime {
    session: Session,
    spec: RuntimeSpec,
    dim: usize,
    pad: u32,
}

impl Engine for OrtRuntime {
    fn runtime(&self) -> RuntimeSpec {
        self.spec
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&mut self, inputs: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, EngineError> {
        let longest = check_batch(self.spec, inputs)?;
        let shape = self.spec.padded_shape(longest, inputs.len() as u32);
        let (rows, len) = (shape.batch as usize, shape.len as usize);
        let (ids, mask) = padded_ids(inputs, rows, len, self.pad);
        let ids = Tensor::from_array(([rows, len], ids)).map_err(ort_err("input ids"))?;
        let mask = Tensor::from_array(([rows, len], mask)).map_err(ort_err("attention mask"))?;
        let outputs =
            self.session.run(ort::inputs![INPUT_IDS => ids, ATTENTION_MASK => mask]).map_err(ort_err("run"))?;
        let (_, pooled) = outputs[POOLED].try_extract_tensor::<f32>().map_err(ort_err("output"))?;
        Ok(pooled.chunks_exact(self.dim).take(inputs.len()).map(<[f32]>::to_vec).collect())
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
