//! `--engine` and the flags of what it runs, shared by `serve`, `profile` and `train`.

use std::path::PathBuf;

use clap::Args;
use clap::builder::{PossibleValue, PossibleValuesParser};
use morph_backend::{DEFAULT_ENGINE, ENGINES, EngineEntry, EngineKind};
use morph_core::{Dtype, TokenPlan};
use morph_deploy::EngineSpec;

#[derive(Debug, Clone, Args)]
pub(crate) struct EngineArgs {
    /// What computes the batches. With --task generate: what runs the length predictor's encoder
    /// (refused where no predictor runs; the decoder's kernels are --decoder-kernels).
    #[arg(long, default_value = DEFAULT_ENGINE, value_parser = engine_names())]
    pub(crate) engine: String,
    /// The ONNX Runtime shared library (libonnxruntime.so, version 1.31). Default:
    /// $ORT_DYLIB_PATH, else the copy in MORPH_HOME, fetched from the PyPI onnxruntime wheel
    /// on first use.
    #[arg(long)]
    pub(crate) ort_library: Option<PathBuf>,
    /// Serve this ONNX file instead of the graph Morph writes from the weights (implies
    /// --engine ort). Inputs input_ids and attention_mask (token_type_ids optional); output
    /// sentence_embedding or last_hidden_state; free dimensions are pinned per runtime. The
    /// model (--model) still gives the tokenizer and config.json.
    #[arg(long)]
    pub(crate) onnx: Option<PathBuf>,
    /// Token plans every ONNX Runtime instance compiles besides the plain model, comma
    /// separated: merge:R merges R tokens per layer (token merging, OTAS's gamma < 0), exit:K
    /// exits after K layers, prune:K@PCT drops PCT% of the tokens after K layers, prompt:P and
    /// prompt-replace:P add P trained prompt tokens per layer (OTAS's gamma > 0); e.g.
    /// --plans merge:1,merge:2,exit:3. A policy picks a batch's plan (dynamic-batching:
    /// '{"plan": "merge:1"}').
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    pub(crate) plans: Vec<TokenPlan>,
    /// The arithmetic of the encoder's weight matrix products on ONNX Runtime: int8
    /// (each token's activations quantised on its own scale, so a text's vector does not
    /// depend on its batch; weights per output column, 7 bits on an x86 CPU without VNNI or
    /// AMX, whose int8 kernels would saturate; the products on Morph's own kernel where the
    /// CPU has AMX tiles or AVX-512 VNNI, else ONNX Runtime's MatMulIntegerToFloat
    /// (MORPH_INT8_KERNEL=mlas or tiles chooses); each product's few outlier input
    /// channels, found on built-in calibration text when the model loads, split into copies
    /// within the other channels' range) or
    /// fp32. bf16 is refused: ONNX Runtime's CPU kernels have no bf16 MatMul. Default for
    /// `serve` and `profile`: int8 where Morph writes the graphs, in threads or worker
    /// processes, on a CPU with int8 dot products (VNNI, AMX; mean cosine to fp32 0.998, every
    /// vector above 0.99; docs/serving.md); on a CPU without them, `serve` with its runtimes
    /// read off the profiles measures both on a first start and serves the faster, elsewhere
    /// fp32 (int8's speed there differs by CPU: 0.95-2.1x fp32's); fp32 on candle and for a
    /// --onnx file; `morph train` and the length predictor's encoder: fp32, what their heads
    /// are fitted on.
    #[arg(long)]
    pub(crate) dtype: Option<Dtype>,
}

impl EngineArgs {
    pub(crate) fn spec(&self) -> anyhow::Result<EngineSpec> {
        Ok(EngineSpec {
            engine: EngineEntry::find(&self.engine)?,
            ort_library: self.ort_library.clone(),
            onnx: self.onnx.clone(),
            plans: self.plans.clone(),
            dtype: self.dtype,
        })
    }

    /// See [`EngineSpec::real`].
    pub(crate) fn real(&self) -> anyhow::Result<EngineKind> {
        self.spec()?.real()
    }

    /// See [`EngineSpec::serving`] (no emulated instances: `morph serve` resolves those).
    pub(crate) fn serving(&self) -> anyhow::Result<EngineKind> {
        self.spec()?.serving(None, 0)
    }
}

/// Every engine's name, with its line of help.
fn engine_names() -> PossibleValuesParser {
    PossibleValuesParser::new(ENGINES.iter().map(|e| PossibleValue::new(e.name).help(e.summary)))
}
