//! SSJF's predictions while serving (§3.2, §6). Prompts are predicted on their own thread as
//! they arrive: all that arrived meanwhile in one batch. The scheduler keeps dispatching while
//! a prompt is predicted (off its critical path); the request then enters the queue with its
//! prediction. The true length of a generation that ended by itself (not cut by its max_tokens)
//! goes into the length cache (§6: "cache the ground truth output token sequence length of hot
//! inputs"), so a repeated prompt is ordered by what it really took, without running the predictor.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use morph_core::{RuntimeSpec, UnitSpec};
use morph_encoder::predictor::model::PROMPT_TOKENS;
use morph_encoder::predictor::{LengthCache, LengthPredictor};
use morph_encoder::{TextTokenizer, model_pooling};
use morph_engine::EngineError;
use morph_engine::actor::{Actor, Mailbox};
use morph_fetch::ModelFiles;
use tokio::sync::oneshot;

use crate::metrics::Metrics;
use morph_backend::EngineKind;

/// Prompts predicted in one encoder pass at most.
const MAX_BATCH: usize = 32;
/// Prompts whose predictions the cache remembers.
const CACHE_CAPACITY: usize = 10_000;

/// Where a generation server's predicted output lengths come from.
#[derive(Debug, Clone, Default)]
pub enum PredictorConfig {
    /// None: SSJF orders by `max_tokens`.
    #[default]
    None,
    /// A trained head (saved in `head`, else the built-in one) over `encoder` run by `engine`.
    Model { encoder: ModelFiles, engine: EngineKind, head: Option<PathBuf> },
    /// The true output lengths by predictor input text: the oracle SJF baseline.
    Oracle(Vec<(String, u32)>),
}

impl PredictorConfig {
    /// Starts the prediction thread, unless there are no predictions.
    pub fn start(&self, metrics: Arc<Metrics>) -> Result<Option<Predictions>, EngineError> {
        let (model, cache) = match self {
            PredictorConfig::None => return Ok(None),
            PredictorConfig::Model { encoder, engine, head } => {
                let backend = engine.load(Some((encoder, model_pooling(&encoder.dir)?)))?;
                let runtime = backend
                    .engine(UnitSpec::batch(RuntimeSpec::dynamic(PROMPT_TOKENS as u32, MAX_BATCH as u32)))?;
                let tokenizer = TextTokenizer::load(&encoder.tokenizer)?;
                let model = LengthPredictor::new(tokenizer, runtime, head.as_deref())?;
                (Some(model), LengthCache::new(CACHE_CAPACITY))
            }
            PredictorConfig::Oracle(known) => (None, LengthCache::filled(known.iter().cloned())),
        };
        Ok(Some(Predictions::spawn(model, cache, metrics).map_err(|e| EngineError::Load(e.to_string()))?))
    }
}

enum Message {
    Ask { text: String, reply: oneshot::Sender<Option<u32>> },
    Truth { text: String, length: u32 },
}

/// Handle to the prediction thread; dropping it stops the thread.
#[derive(Debug)]
pub struct Predictions {
    actor: Actor<Message>,
    metrics: Arc<Metrics>,
    /// What `/info` says of it.
    description: serde_json::Value,
}

impl Predictions {
    /// Predictions from `model`, remembered in `cache`; without a model only what `cache`
    /// holds is known (an oracle's table of true lengths).
    pub fn spawn(
        model: Option<LengthPredictor>,
        cache: LengthCache,
        metrics: Arc<Metrics>,
    ) -> std::io::Result<Self> {
        let description = match &model {
            Some(m) => {
                serde_json::json!({"kind": "model", "objective": m.meta.objective, "encoder": m.meta.encoder, "test_scores": m.meta.scores})
            }
            None => serde_json::json!({"kind": "oracle", "known_lengths": cache.len()}),
        };
        let thread_metrics = metrics.clone();
        let actor =
            Actor::spawn("predictor".into(), move |mailbox| run(model, cache, &mailbox, &thread_metrics))?;
        Ok(Self { actor, metrics, description })
    }

    pub fn describe(&self) -> serde_json::Value {
        self.description.clone()
    }

    /// The predicted output length of the prompt whose predictor input is `text`; `None` when
    /// it is unknown (the scheduler then orders it by its `max_tokens`).
    pub async fn predict(&self, text: String) -> Option<u32> {
        let started = Instant::now();
        let (reply, rx) = oneshot::channel();
        self.actor.send(Message::Ask { text, reply }).ok()?;
        let predicted = rx.await.ok().flatten();
        self.metrics.prediction(started.elapsed().as_secs_f64());
        predicted
    }

    /// Remembers the true output length of the prompt whose predictor input is `text`.
    pub fn learn(&self, text: String, length: u32) {
        let _ = self.actor.send(Message::Truth { text, length });
    }
}

fn run(
    mut model: Option<LengthPredictor>,
    mut cache: LengthCache,
    mailbox: &Mailbox<Message>,
    metrics: &Metrics,
) {
    while let Some(first) = mailbox.recv() {
        let mut known = Vec::new();
        let mut unknown = Vec::new();
        for message in std::iter::once(first).chain(mailbox.sent().take(MAX_BATCH - 1)) {
            match message {
                Message::Truth { text, length } => cache.insert(&text, length),
                Message::Ask { text, reply } => match cache.get(&text) {
                    Some(length) => known.push((reply, length)),
                    None => unknown.push((text, reply)),
                },
            }
        }
        for (reply, length) in known {
            metrics.prediction_cache_hit();
            let _ = reply.send(Some(length));
        }
        let predicted = match (&mut model, unknown.is_empty()) {
            (Some(model), false) => {
                let texts: Vec<&str> = unknown.iter().map(|(text, _)| text.as_str()).collect();
                model.predict(&texts).unwrap_or_else(|e| {
                    tracing::warn!("length prediction failed, ordering by max_tokens: {e}");
                    Vec::new()
                })
            }
            _ => Vec::new(),
        };
        for (i, (_, reply)) in unknown.into_iter().enumerate() {
            let _ = reply.send(predicted.get(i).copied());
        }
    }
}
