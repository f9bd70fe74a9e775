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
    /// The arithmetic of the encoder's weight matrix products on ONNX Runtime: fp32, or int8
    /// (activations quantised per call, weights per output column; ONNX Runtime's
    /// DynamicQuantizeMatMul, VNNI where the CPU has it). bf16 is refused: ONNX Runtime's CPU
    /// kernels have no bf16 MatMul.
    #[arg(long, default_value = "fp32")]
    pub(crate) dtype: Dtype,
}

impl EngineArgs {
    /// The engine for a real model: ONNX Runtime or candle (`emulated` is the caller's case).
    pub(crate) fn real(&self) -> anyhow::Result<EngineKind> {
        let library = || onnxruntime_library(self.ort_library.as_deref(), &morph_home(), &Pip::from_env());
        let (onnx, plans, dtype) = (self.onnx.clone(), self.plans.clone(), self.dtype);
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
            EngineArg::Candle | EngineArg::Emulated if onnx.is_some() => {
                anyhow::bail!("--onnx runs on ONNX Runtime; drop --engine or use --engine ort")
            }
            EngineArg::Ort => Ok(EngineKind::Ort { library: library()?, onnx, plans, dtype }),
            EngineArg::Candle => Ok(EngineKind::Candle),
            EngineArg::Auto => match library() {
                Ok(library) => Ok(EngineKind::Ort { library, onnx, plans, dtype }),
                Err(e) if dtype != Dtype::Fp32 => Err(e.into()),
                Err(e) => {
                    tracing::warn!("ONNX Runtime unavailable ({e}); using the candle engine");
                    Ok(EngineKind::Candle)
                }
            },
            EngineArg::Emulated => anyhow::bail!("--engine emulated is for `morph serve` with --profile"),
        }
    }
}
