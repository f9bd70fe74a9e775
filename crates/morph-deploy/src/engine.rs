//! Which engine computes the batches, and the rules of what each one takes (token plans, a
//! dtype, an ONNX file), each refusal written here once.

use std::path::PathBuf;

use morph_backend::EngineKind;
use morph_core::TokenPlan;
use morph_encoder::onnx::Dtype;
use morph_fetch::{Pip, morph_home, onnxruntime_library};

/// The engine asked for (`--engine`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineChoice {
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

impl EngineChoice {
    /// Whether it runs ONNX Runtime graphs, the only ones token plans and dtypes apply to.
    fn runs_graphs(self) -> bool {
        matches!(self, EngineChoice::Auto | EngineChoice::Ort)
    }
}

/// The engine and what it runs (`--engine`, `--ort-library`, `--onnx`, `--plans`, `--dtype`).
#[derive(Debug, Clone, PartialEq)]
pub struct EngineSpec {
    pub engine: EngineChoice,
    /// libonnxruntime.so; `None`: `$ORT_DYLIB_PATH`, else fetched into `MORPH_HOME`.
    pub ort_library: Option<PathBuf>,
    /// An ONNX file served in place of the graph Morph writes.
    pub onnx: Option<PathBuf>,
    /// Token plans each ONNX Runtime instance compiles besides the plain model.
    pub plans: Vec<TokenPlan>,
    /// `None`: the default of the caller ([`EngineSpec::real`] or [`EngineSpec::serving`]).
    pub dtype: Option<Dtype>,
}

impl EngineSpec {
    /// The engine for a real model (`emulated` is the caller's case), fp32 unless the dtype is
    /// given: what `morph train` fits heads on.
    pub fn real(&self) -> anyhow::Result<EngineKind> {
        self.kind(Dtype::Fp32)
    }

    /// The engine `morph serve` and `morph profile` run: as [`Self::real`], but int8 graphs by
    /// default where they run: Morph's own graphs on ONNX Runtime (in threads and in worker
    /// processes alike: the worker's command line carries the dtype).
    pub fn serving(&self) -> anyhow::Result<EngineKind> {
        let int8_runs = self.onnx.is_none() && self.engine.runs_graphs();
        self.kind(if int8_runs { Dtype::Int8 } else { Dtype::Fp32 })
    }

    /// Refuses what the engine does not take.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.engine.runs_graphs() {
            return Ok(());
        }
        if self.onnx.is_some() {
            return Err(onnx_off_ort());
        }
        if !self.plans.is_empty() {
            anyhow::bail!("--plans compiles ONNX Runtime graphs; use --engine ort");
        }
        match self.dtype {
            Some(dtype) if dtype != Dtype::Fp32 => {
                anyhow::bail!("--dtype {dtype} quantises ONNX Runtime graphs; use --engine ort")
            }
            _ => Ok(()),
        }
    }

    /// The engine with the dtype given, or `default` where it is not.
    fn kind(&self, default: Dtype) -> anyhow::Result<EngineKind> {
        self.check()?;
        let library = || onnxruntime_library(self.ort_library.as_deref(), &morph_home(), &Pip::from_env());
        let (onnx, plans, dtype) = (self.onnx.clone(), self.plans.clone(), self.dtype.unwrap_or(default));
        match self.engine {
            EngineChoice::Ort => Ok(EngineKind::Ort { library: library()?, onnx, plans, dtype }),
            EngineChoice::Candle => Ok(EngineKind::Candle),
            EngineChoice::Auto => match library() {
                Ok(library) => Ok(EngineKind::Ort { library, onnx, plans, dtype }),
                // Asked for by name (a file or a dtype): no quiet fall-back to candle's fp32.
                Err(e) if onnx.is_some() || self.dtype.is_some_and(|d| d != Dtype::Fp32) => Err(e.into()),
                Err(e) => {
                    tracing::warn!("ONNX Runtime unavailable ({e}); using the candle engine");
                    Ok(EngineKind::Candle)
                }
            },
            EngineChoice::Emulated => anyhow::bail!("--engine emulated is for `morph serve` with --profile"),
        }
    }
}

/// The refusal of an ONNX file with an engine other than ONNX Runtime.
pub fn onnx_off_ort() -> anyhow::Error {
    anyhow::anyhow!("--onnx runs on ONNX Runtime; drop --engine or use --engine ort")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(engine: EngineChoice) -> EngineSpec {
        EngineSpec { engine, ort_library: None, onnx: None, plans: Vec::new(), dtype: None }
    }

    #[test]
    fn what_only_onnx_runtime_runs_is_refused_elsewhere_by_its_flag() {
        let refusal = |s: EngineSpec| s.check().unwrap_err().to_string();
        let onnx = EngineSpec { onnx: Some("m.onnx".into()), ..spec(EngineChoice::Candle) };
        assert!(refusal(onnx).starts_with("--onnx runs on ONNX Runtime"));
        let plans = EngineSpec { plans: vec![TokenPlan::Plain], ..spec(EngineChoice::Emulated) };
        assert!(refusal(plans).starts_with("--plans compiles ONNX Runtime graphs"));
        let int8 = EngineSpec { dtype: Some(Dtype::Int8), ..spec(EngineChoice::Candle) };
        assert!(refusal(int8).starts_with("--dtype int8 quantises"));
        assert!(EngineSpec { dtype: Some(Dtype::Fp32), ..spec(EngineChoice::Candle) }.check().is_ok());
        assert!(spec(EngineChoice::Ort).check().is_ok());
        assert!(matches!(spec(EngineChoice::Candle).real().unwrap(), EngineKind::Candle));
    }
}
