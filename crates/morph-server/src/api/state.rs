//! What every handler shares: the driver, what the server serves (an encoder or a decoder), the
//! model's description, and the edge's settings.

use std::sync::Arc;
use std::time::{Duration, Instant};

use morph_encoder::Pooling;

use crate::api::served_facts::{PredictBy, ServedFacts};
use crate::drain::Drain;
use crate::driver::Driver;
use crate::error::CallError;
use crate::infer::{Embedder, Generator, ModelKind};
use crate::prompts::ServedPrompts;

/// What `/info` reports about the deployment.
#[derive(Debug, Clone)]
pub struct ServedModel {
    /// The names `model` fields may give, never empty: the first is the one answers carry.
    pub names: Vec<String>,
    /// When the server started serving it (Unix seconds), as `/v1/models` says.
    pub created: u64,
    pub dim: usize,
    /// `None` for a decoder.
    pub pooling: Option<Pooling>,
    /// `onnxruntime`, `onnxruntime-int8`, `candle`, `emulated`, `llama.cpp-decoder` or `candle-decoder`.
    pub engine: String,
    /// `float32`, `int8` (the encoder's weight products), or `gguf` (a decoder's file's own types).
    pub dtype: &'static str,
    /// The longest input served: the longest runtime's, or an encoder's `max_seq_length` where
    /// shorter.
    pub max_input_len: u32,
    /// An embedding model's prompts (none for others).
    pub prompts: ServedPrompts,
}

impl ServedModel {
    /// The name answers carry.
    pub fn name(&self) -> &str {
        &self.names[0]
    }
}

/// The server's one serving mode.
#[derive(Debug, Clone)]
pub enum Served {
    /// An encoder: embeddings, and OTAS's tasks where the heads read its vectors.
    Embeddings(Arc<Embedder>),
    /// A decoder: completions.
    Generation(Arc<Generator>),
}

#[derive(Debug, Clone)]
pub struct AppState {
    pub driver: Arc<Driver>,
    pub served: Served,
    pub model: Arc<ServedModel>,
    pub api_key: Option<Arc<str>>,
    /// Most inputs in one call.
    pub max_client_batch: usize,
    /// The longest a client may take to send a request's body.
    pub body_timeout: Duration,
    pub started: Instant,
    /// The server's shutdown, as calls see it.
    pub drain: Arc<Drain>,
}

impl AppState {
    /// What the OpenAPI document states of this server: its batch, and the values its model takes.
    pub(crate) fn served_facts(&self) -> ServedFacts {
        let (encoder_vocabulary, decoder_vocabulary, kind) = match &self.served {
            Served::Embeddings(embedder) => (Some(embedder.vocab_size()), None, Some(embedder.kind())),
            Served::Generation(generator) => (None, Some(generator.vocab_size()), None),
        };
        let (root_bodies, predict) = match kind {
            Some(ModelKind::Embedding) => (vec!["EmbedRequest", "SimilarityRequest"], PredictBy::TaskHeads),
            Some(ModelKind::Classifier) => (vec!["PredictRequest"], PredictBy::OwnHead),
            Some(ModelKind::Reranker) => (vec!["RerankRequest"], PredictBy::OwnHead),
            None => (Vec::new(), PredictBy::Nothing),
        };
        ServedFacts {
            // Which models there are is not told to a caller without the key (the document is open).
            names: if self.api_key.is_some() { Vec::new() } else { self.model.names.clone() },
            batch: self.max_client_batch,
            dimensions: kind.map(|_| self.model.dim).into_iter().collect(),
            prompt_names: self.model.prompts.served_names().into_iter().map(str::to_string).collect(),
            encoder_vocabulary,
            decoder_vocabulary,
            root_bodies,
            predict,
            model_on_every_route: false,
        }
    }

    /// The encoder, or a 404 saying what this server serves instead.
    pub(crate) fn embedder(&self) -> Result<&Arc<Embedder>, CallError> {
        match &self.served {
            Served::Embeddings(embedder) => Ok(embedder),
            Served::Generation(_) => Err(CallError::WrongEndpoint {
                served: "text generation: use /v1/completions or /v1/chat/completions",
            }),
        }
    }

    /// The decoder, or a 404 saying what this server serves instead.
    pub(crate) fn generator(&self) -> Result<&Arc<Generator>, CallError> {
        match &self.served {
            Served::Generation(generator) => Ok(generator),
            Served::Embeddings(_) => {
                Err(CallError::WrongEndpoint { served: "embeddings: use /v1/embeddings or /embed" })
            }
        }
    }
}
