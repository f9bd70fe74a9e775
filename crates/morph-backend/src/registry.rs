//! Every engine `--engine` names, in one list ([`ENGINES`]): what it is, which flags it reads,
//! and how it is built from them. The decoder (`engines/decoder.rs`) is chosen by `--task
//! generate` instead, its kernels by `--decoder-kernels`.

use std::path::PathBuf;
use std::sync::Arc;

use morph_core::{Dtype, LatencyProfile, TokenPlan};
use morph_fetch::{Pip, morph_home, onnxruntime_library};

use crate::EngineKind;
use crate::engines::{CandleEngine, EmulatedEngine, OrtEngine};

/// One engine by name.
#[derive(Debug)]
pub struct EngineEntry {
    pub name: &'static str,
    /// One line for `--help`.
    pub summary: &'static str,
    /// Whether it runs ONNX Runtime graphs, the only ones `--onnx`, `--plans` and `--dtype`
    /// apply to.
    pub runs_graphs: bool,
    /// Whether candle computes: its process settings apply (`crate::tuning`).
    pub runs_candle: bool,
    build: fn(&EngineFlags) -> anyhow::Result<EngineKind>,
}

/// The flags an engine may read (each entry reads its own).
#[derive(Debug, Clone)]
pub struct EngineFlags {
    /// libonnxruntime.so; `None`: `$ORT_DYLIB_PATH`, else fetched into `MORPH_HOME`.
    pub ort_library: Option<PathBuf>,
    /// An ONNX file served in place of the graph Morph writes.
    pub onnx: Option<PathBuf>,
    /// Token plans each ONNX Runtime instance compiles besides the plain model.
    pub plans: Vec<TokenPlan>,
    /// The dtype asked for (`None`: `default_dtype`).
    pub dtype: Option<Dtype>,
    pub default_dtype: Dtype,
    /// The latency profile emulated instances sleep for (`--profile`), and their vectors' size.
    pub profile: Option<Arc<LatencyProfile>>,
    pub emulated_dim: usize,
}

/// The engine `--engine` names when it is left out.
pub const DEFAULT_ENGINE: &str = "auto";

/// Every engine `--engine` names.
pub const ENGINES: &[EngineEntry] = &[
    EngineEntry {
        name: DEFAULT_ENGINE,
        summary: "ONNX Runtime when its library is given or can be fetched, else candle (with a warning)",
        runs_graphs: true,
        runs_candle: false,
        build: auto,
    },
    EngineEntry {
        name: "ort",
        summary: "ONNX Runtime 1.31 running the graph Morph writes for each runtime shape",
        runs_graphs: true,
        runs_candle: false,
        build: ort,
    },
    EngineEntry {
        name: "candle",
        summary: "The candle encoder on the CPU",
        runs_graphs: false,
        runs_candle: true,
        build: |_| Ok(EngineKind::new(CandleEngine)),
    },
    EngineEntry {
        name: "emulated",
        summary: "Sleep for the latency a profile gives (serve only; needs --profile); vectors are placeholders",
        runs_graphs: false,
        runs_candle: false,
        build: emulated,
    },
];

impl EngineEntry {
    /// The engine named `name`, or an error listing every name.
    pub fn find(name: &str) -> anyhow::Result<&'static EngineEntry> {
        ENGINES.iter().find(|e| e.name == name).ok_or_else(|| {
            let known: Vec<&str> = ENGINES.iter().map(|e| e.name).collect();
            anyhow::anyhow!("unknown engine '{name}' (known: {})", known.join(", "))
        })
    }

    /// The engine, built from the flags it reads.
    pub fn build(&self, flags: &EngineFlags) -> anyhow::Result<EngineKind> {
        (self.build)(flags)
    }
}

impl EngineFlags {
    fn library(&self) -> anyhow::Result<PathBuf> {
        Ok(onnxruntime_library(self.ort_library.as_deref(), &morph_home(), &Pip::from_env())?)
    }

    fn ort(&self, library: PathBuf) -> EngineKind {
        let dtype = self.dtype.unwrap_or(self.default_dtype);
        EngineKind::new(OrtEngine { library, onnx: self.onnx.clone(), plans: self.plans.clone(), dtype })
    }
}

fn ort(flags: &EngineFlags) -> anyhow::Result<EngineKind> {
    Ok(flags.ort(flags.library()?))
}

fn auto(flags: &EngineFlags) -> anyhow::Result<EngineKind> {
    match flags.library() {
        Ok(library) => Ok(flags.ort(library)),
        // Asked for by name (a file or a dtype): no quiet fall-back to candle's fp32.
        Err(e) if flags.onnx.is_some() || flags.dtype.is_some_and(|d| d != Dtype::Fp32) => Err(e),
        Err(e) => {
            tracing::warn!("ONNX Runtime unavailable ({e}); using the candle engine");
            Ok(EngineKind::new(CandleEngine))
        }
    }
}

fn emulated(flags: &EngineFlags) -> anyhow::Result<EngineKind> {
    match &flags.profile {
        Some(profile) => {
            Ok(EngineKind::new(EmulatedEngine { profile: profile.clone(), dim: flags.emulated_dim }))
        }
        None => anyhow::bail!("--engine emulated needs --profile FILE (`morph serve` only)"),
    }
}

#[cfg(test)]
mod tests {
    use morph_core::fixtures::flat_profile;
    use morph_core::{RuntimeSpec, UnitKind};
    use morph_decoder::{DecoderKernels, PrefillWeights, PromptCacheConfig};

    use super::*;
    use crate::EngineConfig;
    use crate::engines::{DecoderEngine, NO_STAGES_OF_ONNX_FILE, NO_STAGES_ON_CANDLE};

    fn flags(profile: Option<Arc<LatencyProfile>>) -> EngineFlags {
        EngineFlags {
            ort_library: None,
            onnx: None,
            plans: Vec::new(),
            dtype: None,
            default_dtype: Dtype::Fp32,
            profile,
            emulated_dim: 8,
        }
    }

    #[test]
    fn every_engine_has_one_name_and_an_unknown_one_is_refused_with_the_list() {
        let mut names: Vec<&str> = ENGINES.iter().map(|e| e.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ENGINES.len(), "a name twice");
        let refusal = EngineEntry::find("openvino").unwrap_err().to_string();
        assert!(
            refusal.contains("unknown engine 'openvino'") && refusal.contains("auto, ort, candle, emulated")
        );
    }

    #[test]
    fn an_engine_built_by_name_says_what_it_can_run_and_loads_its_instances() {
        let no_profile = EngineEntry::find("emulated").unwrap().build(&flags(None)).unwrap_err();
        assert!(no_profile.to_string().contains("--profile"), "{no_profile}");
        let profile = Arc::new(flat_profile(1.0, 1));
        let emulated = EngineEntry::find("emulated").unwrap().build(&flags(Some(profile))).unwrap();
        assert_eq!(
            (emulated.label(), emulated.can().stages, emulated.generates()),
            ("emulated", Ok(()), false)
        );
        assert!(emulated.processes_model(None).is_none(), "emulated instances run in threads only");
        let backend = emulated.load(None).unwrap();
        let stages = backend.stage_units(RuntimeSpec::dynamic(64, 4), 3).unwrap();
        assert_eq!(stages.len(), 3);
        assert!(stages.iter().all(|u| u.kind == UnitKind::Batch && u.stage.is_some()));
        assert_eq!(backend.engine(stages[0]).unwrap().dim(), 8);

        let candle = EngineEntry::find("candle").unwrap().build(&flags(None)).unwrap();
        assert_eq!(candle.can().stages, Err(NO_STAGES_ON_CANDLE));
        let files = candle.load(None).unwrap_err().to_string();
        assert!(files.contains("needs the encoder's files"), "{files}");
        let file = OrtEngine {
            library: "ort.so".into(),
            onnx: Some("m.onnx".into()),
            plans: Vec::new(),
            dtype: Dtype::Int8,
        };
        assert_eq!((file.label(), file.model_dtype()), ("onnxruntime-int8", "int8"));
        assert_eq!(file.can().stages, Err(NO_STAGES_OF_ONNX_FILE));
        assert!(EngineKind::new(file).processes_model(None).is_none(), "a user's file runs in threads only");
    }

    #[test]
    fn a_decoder_runs_its_prefill_stages_in_worker_processes_only_on_candle() {
        let decoder = |kernels| {
            EngineKind::new(DecoderEngine {
                gguf: "/m/smollm2.gguf".into(),
                prefill_chunk: 256,
                batch_threads: None,
                kernels,
                chat_template: None,
                prompt_cache: PromptCacheConfig::OFF,
                prefill: PrefillWeights::File,
            })
        };
        let candle = decoder(DecoderKernels::Candle);
        assert!(candle.generates());
        assert_eq!(candle.model_name().as_deref(), Some("smollm2"));
        let stages = candle.processes_model(None).expect("prefill stages in worker processes");
        assert_eq!((stages.name.as_str(), stages.threads_env), ("smollm2", Some("RAYON_NUM_THREADS")));
        assert_eq!(stages.args, ["--gguf", "/m/smollm2.gguf"]);
        let llama = decoder(DecoderKernels::LlamaCpp);
        assert!(llama.can().stages.is_err() && llama.processes_model(None).is_none());
    }
}
