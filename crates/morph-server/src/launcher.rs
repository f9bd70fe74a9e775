//! The in-process launcher: loads the model once and starts one engine worker per instance.

use std::sync::Arc;

use morph_core::{Profile, RuntimeSpec};
use morph_engine::{
    CandleRuntime, EmulatedRuntime, Encoder, Engine, EngineError, EngineWorker, ModelFiles, Pooling,
};

/// What computes the batches.
#[derive(Debug, Clone)]
pub enum EngineKind {
    /// The candle encoder on the CPU.
    Candle,
    /// Emulated instances taking their latency from a profile; vectors are placeholders.
    Emulated { profile: Arc<Profile>, dim: usize },
}

impl EngineKind {
    pub fn label(&self) -> &'static str {
        match self {
            EngineKind::Candle => "candle",
            EngineKind::Emulated { .. } => "emulated",
        }
    }
}

/// Starts `instances` workers for every runtime, in runtime order. Returns them with the
/// output dimension.
pub fn launch(
    files: &ModelFiles,
    pooling: Pooling,
    kind: &EngineKind,
    runtimes: &[RuntimeSpec],
    instances: usize,
) -> Result<(Vec<EngineWorker>, usize), EngineError> {
    let encoder = match kind {
        EngineKind::Candle => Some(Arc::new(Encoder::load(files, pooling)?)),
        EngineKind::Emulated { .. } => None,
    };
    let mut workers = Vec::with_capacity(runtimes.len() * instances);
    let mut dim = 0;
    for spec in runtimes {
        for i in 0..instances {
            let engine: Box<dyn Engine> = match (kind, &encoder) {
                (EngineKind::Emulated { profile, dim }, _) => {
                    Box::new(EmulatedRuntime::new(profile.clone(), *spec, *dim))
                }
                (EngineKind::Candle, Some(encoder)) => Box::new(CandleRuntime::new(encoder.clone(), *spec)?),
                (EngineKind::Candle, None) => unreachable!("the encoder is loaded for candle"),
            };
            dim = engine.dim();
            let name = format!("morph-{spec}-{i}");
            let worker = EngineWorker::spawn(name, engine).map_err(|e| EngineError::Load(e.to_string()))?;
            workers.push(worker);
        }
    }
    Ok((workers, dim))
}
