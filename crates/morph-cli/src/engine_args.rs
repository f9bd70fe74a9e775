//! `--engine` and `--ort-library`, shared by `serve` and `profile`.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use morph_backend::EngineKind;
use morph_core::TokenPlan;
use morph_encoder::onnx::Dtype;
use morph_fetch::onnxruntime_library;
use morph_fetch::{Pip, morph_home};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum EngineArg {
    /// ONNX Runtime when its library is given or can be fetched, else candle (with a warning).
    Auto,
    /// ONNX Runtime 1.31 running the graph Morph writes for each runtime shape.
    Ort,
    /// The candle encoder on the CPU.
    Candle,
    /// Sleep for the latency a profile gives (serve only; needs --profile); vectors are
    /// placeholders.
    Emulated,
}

#[derive(Debug, Clone, Args)]
pub(crate) struct EngineArgs {
    /// What computes the batches.
    #[arg(long, value_enum, default_value = "auto")]
    pub(crate) engine: EngineArg,
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
    /// (activations quantised per call, weights per output column; ONNX Runtime's
    /// DynamicQuantizeMatMul, VNNI where the CPU has it) or fp32. bf16 is refused: ONNX
    /// Runtime's CPU kernels have no bf16 MatMul. Default for `serve` and `profile`: int8 where
    /// Morph writes the graphs and runs them in threads (every vector within cosine 0.98 of
    /// fp32's, 1.5x fp32's rate on a 2-core EPYC; docs/serving.md), else fp32 (candle, a --onnx
    /// file, worker processes); `morph train` and the length predictor's encoder: fp32, what
    /// their heads are fitted on.
    #[arg(long)]
    pub(crate) dtype: Option<Dtype>,
}

impl EngineArgs {
    /// The engine for a real model (`emulated` is the caller's case), fp32 unless --dtype says
    /// otherwise: what `morph train` fits heads on.
    pub(crate) fn real(&self) -> anyhow::Result<EngineKind> {
        self.kind(Dtype::Fp32)
    }

    /// The engine `morph serve` and `morph profile` run: as [`Self::real`], but int8 graphs by
    /// default where they run: Morph's own graphs on ONNX Runtime, in threads (not in worker
    /// processes, whose wire does not carry the dtype).
    pub(crate) fn serving(&self, in_processes: bool) -> anyhow::Result<EngineKind> {
        let int8_runs =
            self.onnx.is_none() && !in_processes && matches!(self.engine, EngineArg::Ort | EngineArg::Auto);
        self.kind(if int8_runs { Dtype::Int8 } else { Dtype::Fp32 })
    }

    /// The engine with `--dtype`, or `default` where it is not given.
    fn kind(&self, default: Dtype) -> anyhow::Result<EngineKind> {
        let library = || onnxruntime_library(self.ort_library.as_deref(), &morph_home(), &Pip::from_env());
        let (onnx, plans, dtype) = (self.onnx.clone(), self.plans.clone(), self.dtype.unwrap_or(default));
        if !plans.is_empty() && self.engine == EngineArg::Candle {
            anyhow::bail!("--plans compiles ONNX Runtime graphs; drop --engine candle");
        }
        if dtype != Dtype::Fp32 && matches!(self.engine, EngineArg::Candle | EngineArg::Emulated) {
            anyhow::bail!("--dtype {dtype} quantises ONNX Runtime graphs; use --engine ort");
        }
        match self.engine {
            EngineArg::Ort | EngineArg::Auto if onnx.is_some() => {
                Ok(EngineKind::Ort { library: library()?, onnx, plans, dtype })
            }
            EngineArg::Candle | EngineArg::Emulated if onnx.is_some() => Err(onnx_off_ort()),
            EngineArg::Ort => Ok(EngineKind::Ort { library: library()?, onnx, plans, dtype }),
            EngineArg::Candle => Ok(EngineKind::Candle),
            EngineArg::Auto => match library() {
                Ok(library) => Ok(EngineKind::Ort { library, onnx, plans, dtype }),
                // Asked for by name: no quiet fall-back to candle's fp32.
                Err(e) if self.dtype.is_some_and(|d| d != Dtype::Fp32) => Err(e.into()),
                Err(e) => {
                    tracing::warn!("ONNX Runtime unavailable ({e}); using the candle engine");
                    Ok(EngineKind::Candle)
                }
            },
            EngineArg::Emulated => anyhow::bail!("--engine emulated is for `morph serve` with --profile"),
        }
    }
}

/// The refusal of `--onnx` with an engine other than ONNX Runtime.
pub(crate) fn onnx_off_ort() -> anyhow::Error {
    anyhow::anyhow!("--onnx runs on ONNX Runtime; drop --engine or use --engine ort")
}
