//! ONNX Runtime: sessions of the graph Morph writes for each instance's unit (a runtime shape, a
//! layer range), or of a user's ONNX file with its free dimensions pinned.

use std::path::{Path, PathBuf};

use std::time::Instant;

use morph_core::{Dtype, Pooling, TokenPlan, UnitSpec};
use morph_encoder::checkpoint::Checkpoint;
use morph_encoder::onnx::precision::IntegerKernel;
use morph_encoder::ort_session::environment;
use morph_encoder::{OrtEncoder, OrtRuntime, given_or_model_pooling};
use morph_engine::{Engine, EngineError, Rows};
use morph_fetch::{ModelSource, fetch, morph_home};
use morph_worker::host::WorkerModel;
use morph_worker::remote::Built;

use crate::{EngineCan, EngineConfig, LoadedModel, ModelInput, WorkerStart};

/// Why a user's ONNX file cannot be cut into pipeline stages (nor run in worker processes).
pub const NO_STAGES_OF_ONNX_FILE: &str = "pipeline stages of a user's ONNX file (Morph's own graphs only)";

/// ONNX Runtime from `library`, one session per token plan in `plans` (the plain model always)
/// of Morph's graph multiplying its weights in `dtype`, or of the user's ONNX file `onnx`.
#[derive(Debug, Clone)]
pub struct OrtEngine {
    pub library: PathBuf,
    pub onnx: Option<PathBuf>,
    pub plans: Vec<TokenPlan>,
    pub dtype: Dtype,
}

impl EngineConfig for OrtEngine {
    fn label(&self) -> &'static str {
        match self.dtype {
            Dtype::Int8 => "onnxruntime-int8",
            _ => "onnxruntime",
        }
    }

    fn model_dtype(&self) -> &'static str {
        match self.dtype {
            Dtype::Int8 => "int8",
            _ => "float32",
        }
    }

    fn graph_fingerprint(&self) -> Option<&'static str> {
        Some(morph_encoder::onnx::GRAPH_FINGERPRINT)
    }

    fn can(&self) -> EngineCan {
        // Layers are known (and cut, and rebuilt in a worker, in the same dtype) only in the
        // graphs Morph writes.
        let own = self.onnx.is_none();
        EngineCan { stages: if own { Ok(()) } else { Err(NO_STAGES_OF_ONNX_FILE) }, processes: own }
    }

    fn load_model(&self, model: ModelInput) -> Result<Box<dyn LoadedModel>, EngineError> {
        let (files, pooling) = super::encoder_files(model, self.label())?;
        if self.dtype == Dtype::Int8 && self.onnx.is_none() {
            let kernel = IntegerKernel::for_host().map_err(EngineError::Load)?;
            tracing::info!(%kernel, "int8 weight products (MORPH_INT8_KERNEL=mlas or tiles chooses)");
        }
        let encoder = match &self.onnx {
            None => OrtEncoder::load(files, pooling, &self.library)?,
            Some(onnx) => OrtEncoder::load_file(files, onnx, pooling, &self.library)?,
        }
        .with_dtype(self.dtype)?;
        Ok(Box::new(OrtModel { encoder, plans: with_plain(&self.plans) }))
    }

    fn worker_model(&self, model: ModelInput) -> Option<WorkerModel> {
        let (files, pooling) = model?;
        Some(Self::worker(&files.dir, &self.library, pooling, &self.plans, self.dtype))
    }
}

impl OrtEngine {
    /// What a `morph worker` process loads to run Morph's graphs of the encoder in `dir`, their
    /// weight products in `dtype` (the server's own, so that every mode serves the same
    /// vectors), compiling `plans` besides the plain model.
    pub fn worker(
        dir: &Path,
        library: &Path,
        pooling: Pooling,
        plans: &[TokenPlan],
        dtype: Dtype,
    ) -> WorkerModel {
        let mut args = vec!["--model".into(), dir.into(), "--ort-library".into(), library.into()];
        args.push(format!("--pooling={pooling}").into());
        args.push(format!("--dtype={dtype}").into());
        if !plans.is_empty() {
            let plans: Vec<String> = plans.iter().map(TokenPlan::to_string).collect();
            args.push(format!("--plans={}", plans.join(",")).into());
        }
        let (plans, variant) = (plans.to_vec(), dtype.to_string());
        WorkerModel { name: WorkerModel::name_of(dir), args, plans, variant, threads_env: None }
    }

    /// In a `morph worker` process: the unit of the encoder in `dir` (pooled as given, else as
    /// the model says), compiled with `plans` besides the plain model: warm from its
    /// prepared graphs, or cold from the weights, the graph written and optimised.
    pub fn start_worker(
        dir: &Path,
        library: &Path,
        pooling: Option<Pooling>,
        dtype: Dtype,
        plans: &[TokenPlan],
        start: WorkerStart,
    ) -> Result<Built, EngineError> {
        let (unit, plans) = (start.unit, &with_plain(plans));
        let load = |e: morph_fetch::FetchError| EngineError::Load(e.to_string());
        let files = fetch(&ModelSource::Local(dir.to_path_buf()), &morph_home()).map_err(load)?;
        let config = Checkpoint::config(&files)?;
        let first = match unit.stage {
            Some(stage) if stage.index > 0 => Rows::Hidden(vec![vec![0.0; 2 * config.hidden_size]]),
            _ => Rows::Tokens(vec![vec![config.pad_token_id, config.pad_token_id]]),
        };
        let (engine, times) = match start.prepared {
            Some(dir) => {
                let shape = (config.hidden_size, config.pad_token_id);
                OrtRuntime::load_prepared(library, dir, unit, plans, shape)?
            }
            None => {
                let started = Instant::now();
                environment(library)?;
                let library_time = started.elapsed();
                let read = Instant::now();
                let pooling = given_or_model_pooling(pooling, &files.dir)?;
                let encoder = OrtEncoder::load(&files, pooling, library)?.with_dtype(dtype)?;
                let read = read.elapsed();
                let (runtime, mut times) = encoder.compile(unit, plans, start.prepare)?;
                times.read = read;
                times.library = library_time;
                (runtime, times)
            }
        };
        Ok(Built { engine: Box::new(engine), prepared: start.prepared.is_some(), times, first })
    }
}

/// `plans` and the plain model, each once, in order: what every instance compiles.
fn with_plain(plans: &[TokenPlan]) -> Vec<TokenPlan> {
    let mut plans = plans.to_vec();
    plans.push(TokenPlan::Plain);
    plans.sort_unstable();
    plans.dedup();
    plans
}

/// The encoder and the token plans every instance compiles.
#[derive(Debug)]
struct OrtModel {
    encoder: OrtEncoder,
    plans: Vec<TokenPlan>,
}

impl LoadedModel for OrtModel {
    fn dim(&self) -> usize {
        self.encoder.dim()
    }

    fn layers(&self, _stages: u16) -> Result<usize, EngineError> {
        self.encoder.layers().ok_or_else(|| EngineError::Unsupported(NO_STAGES_OF_ONNX_FILE.into()))
    }

    fn instance(&self, unit: UnitSpec) -> Result<Box<dyn Engine>, EngineError> {
        Ok(Box::new(self.encoder.instance(unit, &self.plans)?))
    }
}
