//! A decoder LM from a GGUF file, for generation: each instance a continuous batch whose steps
//! run on llama.cpp's or candle's kernels; its prefill stages (candle) as encoder units.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use morph_core::{UnitKind, UnitSpec};
use morph_decoder::{
    DecoderKernels, DecoderStage, Llama, LoadedDecoder, PrefillWeights, PromptCacheConfig, load_decoder,
};
use morph_engine::{Engine, EngineError, Rows, StartTimes};
use morph_worker::host::WorkerModel;
use morph_worker::remote::Built;

use crate::{DecoderSteps, EngineCan, EngineConfig, LoadedModel, ModelInput, WorkerStart};

/// Why a decoder on llama.cpp's kernels cannot be cut into prefill stages.
const NO_STAGES_ON_LLAMA_CPP: &str =
    "a decoder's prefill stages run on candle (--decoder-kernels candle), not llama.cpp";

/// The decoder in `gguf`, feeding prompts `prefill_chunk` tokens per iteration at most (0:
/// whole prompts), its steps run by `kernels`, its chats rendered by `chat_template` (Jinja) if
/// given, else by the file's, keeping closed sequences' prompt states in host memory as
/// `prompt_cache` says and prefilling prompts on `prefill` (llama.cpp's kernels only), a step
/// that feeds more than one token on `batch_threads` (`None`: its instance's threads).
#[derive(Debug, Clone)]
pub struct DecoderEngine {
    pub gguf: PathBuf,
    pub prefill_chunk: usize,
    pub batch_threads: Option<u16>,
    pub kernels: DecoderKernels,
    pub chat_template: Option<String>,
    pub prompt_cache: PromptCacheConfig,
    pub prefill: PrefillWeights,
}

impl EngineConfig for DecoderEngine {
    fn label(&self) -> &'static str {
        self.kernels.label()
    }

    fn model_dtype(&self) -> &'static str {
        "gguf"
    }

    fn can(&self) -> EngineCan {
        // A decoder's stages run its prefill on candle; only they run in worker processes.
        let candle = self.kernels == DecoderKernels::Candle;
        EngineCan { stages: if candle { Ok(()) } else { Err(NO_STAGES_ON_LLAMA_CPP) }, processes: candle }
    }

    fn generates(&self) -> bool {
        true
    }

    fn model_name(&self) -> Option<String> {
        Some(self.gguf.file_stem().map_or_else(|| "decoder".into(), |s| s.to_string_lossy().into_owned()))
    }

    fn load_model(&self, _model: ModelInput) -> Result<Box<dyn LoadedModel>, EngineError> {
        let decoder = load_decoder(
            &self.gguf,
            self.kernels,
            self.chat_template.as_deref(),
            self.prompt_cache,
            self.prefill,
        )?;
        let steps = DecoderSteps { prefill_chunk: self.prefill_chunk, batch_threads: self.batch_threads };
        Ok(Box::new(DecoderLoaded { decoder, steps }))
    }

    fn worker_model(&self, _model: ModelInput) -> Option<WorkerModel> {
        Some(Self::stages_worker(&self.gguf))
    }
}

impl DecoderEngine {
    /// What a `morph worker` process loads to run prefill stages of the decoder in `gguf` (on
    /// candle's kernels, which size their thread pool from rayon's variable).
    pub fn stages_worker(gguf: &Path) -> WorkerModel {
        let args = vec!["--gguf".into(), gguf.into()];
        let name = WorkerModel::name_of(gguf);
        WorkerModel {
            name,
            args,
            plans: Vec::new(),
            variant: String::new(),
            threads_env: Some("RAYON_NUM_THREADS"),
        }
    }

    /// In a `morph worker` process: the prefill of the unit's stage (or of the whole model) of
    /// the decoder in `gguf`, warm from its prepared f32 tensors, or cold, its layers read from
    /// the GGUF file and expanded to f32.
    pub fn start_stage(gguf: &Path, start: WorkerStart) -> Result<Built, EngineError> {
        let unit = start.unit;
        let read = Instant::now();
        let llama = match (start.prepared, unit.stage) {
            (Some(dir), _) => Llama::load_prepared(dir)?,
            (None, Some(stage)) => {
                Llama::load_stage(gguf, usize::from(stage.first_layer)..usize::from(stage.end_layer))?
            }
            (None, None) => Llama::load(gguf)?.llama,
        };
        let read = read.elapsed();
        let build = Instant::now();
        if let Some(dir) = start.prepare {
            llama.save_prepared(dir)?;
        }
        let times = StartTimes { read, build: build.elapsed(), ..StartTimes::default() };
        let first = match unit.stage.map_or(0, |s| s.index) {
            0 => Rows::Tokens(vec![vec![0, 0]]),
            _ => Rows::Hidden(vec![vec![0.0; 2 * llama.config.hidden]]),
        };
        let engine = DecoderStage::new(Arc::new(llama), unit.runtime, unit.stage);
        Ok(Built { engine: Box::new(engine), prepared: start.prepared.is_some(), times, first })
    }
}

/// The decoder (its shape and tokenizer; its weights too on candle), what runs its
/// generations' steps, and how its steps run.
#[derive(Debug)]
struct DecoderLoaded {
    decoder: LoadedDecoder,
    steps: DecoderSteps,
}

impl LoadedModel for DecoderLoaded {
    fn dim(&self) -> usize {
        self.decoder.model.llama.config.hidden
    }

    /// A decoder's stages run its prefill only.
    fn layers(&self, _stages: u16) -> Result<usize, EngineError> {
        Ok(self.decoder.model.llama.config.layers)
    }

    /// An encoder unit of a decoder is a prefill: of a stage, or (no stage) of the whole.
    fn instance(&self, unit: UnitSpec) -> Result<Box<dyn Engine>, EngineError> {
        if unit.kind == UnitKind::Generation {
            return Err(EngineError::Load("a decoder runs generations, not encoder batches".into()));
        }
        Ok(Box::new(DecoderStage::new(self.decoder.model.clone(), unit.runtime, unit.stage)))
    }

    fn decoder(&self) -> Option<(&LoadedDecoder, DecoderSteps)> {
        Some((&self.decoder, self.steps))
    }
}
