//! The engine asked for (`--engine NAME`, one of `morph_backend::ENGINES`) and the flags of
//! what it runs, each refusal of a flag the engine does not read written here once.

use std::path::PathBuf;
use std::sync::Arc;

use morph_backend::{DEFAULT_ENGINE, EngineEntry, EngineFlags, EngineKind};
use morph_core::{Dtype, LatencyProfile, TokenPlan};
use morph_engine::host;

/// The engine and what it runs (`--engine`, `--ort-library`, `--onnx`, `--plans`, `--dtype`).
#[derive(Debug, Clone)]
pub struct EngineSpec {
    pub engine: &'static EngineEntry,
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
        self.kind(Dtype::Fp32, None, 0)
    }

    /// The engine `morph serve` and `morph profile` run: as [`Self::real`], but int8 graphs by
    /// default where they run and pay: Morph's own graphs on ONNX Runtime (in threads and in
    /// worker processes alike: the worker's command line carries the dtype), on a CPU with int8
    /// dot products (without them int8 products run no faster than fp32 and are less exact:
    /// docs/serving.md, Int8 graphs); emulated instances sleep for `profile`'s latency and
    /// answer vectors of `emulated_dim`.
    pub fn serving(
        &self,
        profile: Option<Arc<LatencyProfile>>,
        emulated_dim: usize,
    ) -> anyhow::Result<EngineKind> {
        let graphs = self.runs_own_graphs();
        self.kind(if graphs { default_graph_dtype() } else { Dtype::Fp32 }, profile, emulated_dim)
    }

    /// [`Self::serving`] in `dtype` unless `--dtype` names one.
    pub fn serving_in(&self, dtype: Dtype) -> anyhow::Result<EngineKind> {
        self.kind(dtype, None, 0)
    }

    /// The dtypes a first start measures Morph's own graphs in and serves the faster of, where
    /// the dtype is left to the host: int8 and fp32 on a CPU without int8 dot products, where
    /// int8's speed against fp32 differs by CPU (served 0.95-0.99x on one AVX2-only VM,
    /// 1.4-2.1x on another: docs/serving.md, Int8 graphs). Empty where the dtype is given or the rule
    /// ([`default_graph_dtype`]) decides.
    pub fn dtypes_to_measure(&self) -> Vec<Dtype> {
        match self.dtype.is_none() && self.runs_own_graphs() && host::int8_pairs_saturate() {
            true => vec![Dtype::Int8, Dtype::Fp32],
            false => Vec::new(),
        }
    }

    fn runs_own_graphs(&self) -> bool {
        self.onnx.is_none() && self.engine.runs_graphs
    }

    /// Refuses what the engine does not take.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.engine.runs_graphs {
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

    /// The first of these flags given, by name (`None`: every one left at its default).
    pub fn flag_given(&self) -> Option<&'static str> {
        [
            (self.engine.name != DEFAULT_ENGINE, "--engine"),
            (self.ort_library.is_some(), "--ort-library"),
            (self.onnx.is_some(), "--onnx"),
            (!self.plans.is_empty(), "--plans"),
            (self.dtype.is_some(), "--dtype"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }

    /// The engine with the dtype given, or `default_dtype` where it is not.
    fn kind(
        &self,
        default_dtype: Dtype,
        profile: Option<Arc<LatencyProfile>>,
        emulated_dim: usize,
    ) -> anyhow::Result<EngineKind> {
        self.check()?;
        self.engine.build(&EngineFlags {
            ort_library: self.ort_library.clone(),
            onnx: self.onnx.clone(),
            plans: self.plans.clone(),
            dtype: self.dtype,
            default_dtype,
            profile,
            emulated_dim,
        })
    }
}

/// The refusal of an ONNX file with an engine other than ONNX Runtime.
pub fn onnx_off_ort() -> anyhow::Error {
    anyhow::anyhow!("--onnx runs on ONNX Runtime; drop --engine or use --engine ort")
}

/// The dtype Morph's own graphs serve in by default on this host: int8 where the CPU has int8
/// dot products, else fp32 (as fast there, and exact).
pub fn default_graph_dtype() -> Dtype {
    if host::int8_pairs_saturate() { Dtype::Fp32 } else { Dtype::Int8 }
}

#[cfg(test)]
pub(crate) mod tests {
    use morph_backend::engines::CandleEngine;

    use super::*;

    pub(crate) fn spec(engine: &str) -> EngineSpec {
        let engine = EngineEntry::find(engine).unwrap();
        EngineSpec { engine, ort_library: None, onnx: None, plans: Vec::new(), dtype: None }
    }

    #[test]
    fn a_first_start_measures_both_dtypes_only_where_the_host_leaves_the_choice_open() {
        let open = match host::int8_pairs_saturate() {
            true => vec![Dtype::Int8, Dtype::Fp32],
            false => Vec::new(),
        };
        assert_eq!(spec("ort").dtypes_to_measure(), open);
        let named = EngineSpec { dtype: Some(Dtype::Fp32), ..spec("ort") };
        assert!(named.dtypes_to_measure().is_empty(), "--dtype decides");
        let file = EngineSpec { onnx: Some("m.onnx".into()), ..spec("ort") };
        assert!(file.dtypes_to_measure().is_empty(), "an ONNX file has its own dtype");
        assert!(spec("candle").dtypes_to_measure().is_empty());
    }

    #[test]
    fn what_only_onnx_runtime_runs_is_refused_elsewhere_by_its_flag() {
        let refusal = |s: EngineSpec| s.check().unwrap_err().to_string();
        let onnx = EngineSpec { onnx: Some("m.onnx".into()), ..spec("candle") };
        assert!(refusal(onnx).starts_with("--onnx runs on ONNX Runtime"));
        let plans = EngineSpec { plans: vec![TokenPlan::Plain], ..spec("emulated") };
        assert!(refusal(plans).starts_with("--plans compiles ONNX Runtime graphs"));
        let int8 = EngineSpec { dtype: Some(Dtype::Int8), ..spec("candle") };
        assert!(refusal(int8).starts_with("--dtype int8 quantises"));
        assert!(EngineSpec { dtype: Some(Dtype::Fp32), ..spec("candle") }.check().is_ok());
        assert!(spec("ort").check().is_ok());
        assert!(spec("candle").real().unwrap().settings::<CandleEngine>().is_some());
        let emulated = spec("emulated").real().unwrap_err().to_string();
        assert!(emulated.contains("--profile"), "{emulated}");
    }
}
