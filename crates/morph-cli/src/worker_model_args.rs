//! What a host's worker processes run: `morph worker` and `morph agent` take the same flags.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use morph_backend::engines::{DecoderEngine, OrtEngine};
use morph_core::{Dtype, Pooling};
use morph_encoder::given_or_model_pooling;
use morph_fetch::{Pip, morph_home, onnxruntime_library};
use morph_worker::host::WorkerModel;

#[derive(Debug, Args)]
pub(crate) struct WorkerModelArgs {
    /// The encoder's local directory (config.json, model.safetensors).
    #[arg(long, required_unless_present = "gguf", conflicts_with = "gguf")]
    pub(crate) model: Option<PathBuf>,
    /// The ONNX Runtime shared library (for an encoder). An agent's default: $ORT_DYLIB_PATH,
    /// else the copy in MORPH_HOME (fetched from PyPI on first use).
    #[arg(long)]
    pub(crate) ort_library: Option<PathBuf>,
    /// A decoder's GGUF file: a worker runs the prefill of its unit's stage (or of the whole
    /// model, for a unit without a stage).
    #[arg(long)]
    pub(crate) gguf: Option<PathBuf>,
    /// Pooling of the last stage (default: the model's own).
    #[arg(long)]
    pub(crate) pooling: Option<Pooling>,
    /// The encoder graphs' weight products: int8 or fp32; default as `morph serve`'s (int8 on a
    /// CPU with VNNI or AMX, else fp32). A server gives its workers its own; an agent's must
    /// match its servers'.
    #[arg(long, default_value_t = morph_deploy::engine::default_graph_dtype())]
    pub(crate) dtype: Dtype,
}

impl WorkerModelArgs {
    /// The model the workers run.
    pub(crate) fn worker_model(&self) -> anyhow::Result<WorkerModel> {
        if let Some(gguf) = &self.gguf {
            return Ok(DecoderEngine::stages_worker(gguf));
        }
        let dir = self.model.clone().context("--model or --gguf")?;
        let library = match &self.ort_library {
            Some(library) => library.clone(),
            None => onnxruntime_library(None, &morph_home(), &Pip::from_env())?,
        };
        let pooling = given_or_model_pooling(self.pooling, &dir)?;
        Ok(OrtEngine::worker(&dir, &library, pooling, &[], self.dtype))
    }
}
