//! What the OpenAPI document states that only the running server knows ([`ServedFacts`]): the
//! names it answers to, how many items a batch takes, the values its model decides (token ids,
//! vector size, prompt names), and the bodies its kind of model takes at `POST /` and `/predict`.
//! Set on the document when the server starts ([`document::state_served`]), so that what the
//! document allows is what the server's checks let through. A several-model server states what
//! any of its models takes ([`ServedFacts::joined`]).

mod document;

pub(crate) use document::state_served;

/// What the document states that only the running server knows: the values it takes where the
/// checks compare with the served model or the server's settings.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ServedFacts {
    /// The names a `model` field may give; none stated on a server with an API key, whose open
    /// document does not tell which models there are.
    pub names: Vec<String>,
    /// `--max-client-batch`: the most items a batch field takes.
    pub batch: usize,
    /// The sizes of the models' vectors: those `dimensions` takes (none where no model embeds).
    pub dimensions: Vec<usize>,
    /// The model's prompts' names: those `prompt_name` takes.
    pub prompt_names: Vec<String>,
    /// The encoders' tokenizers' size: token ids sent to the encoder routes are below it (`None`
    /// where no model encodes).
    pub encoder_vocabulary: Option<usize>,
    /// The decoder's tokenizer's size: token ids in a prompt are below it (`None` where no model
    /// generates).
    pub decoder_vocabulary: Option<usize>,
    /// The bodies `POST /` (and `/invocations`, and each of Vertex AI's instances) takes on this
    /// server: the served kind's routes'.
    pub root_bodies: Vec<&'static str>,
    /// How `/predict` reads a call on this server.
    pub predict: PredictBy,
    /// Whether every model route reads `model` (a several-model server's TEI routes take it to
    /// choose the model; one model's server refuses it there as a field they lack).
    pub model_on_every_route: bool,
}

/// What `/predict` answers with on a server, which decides the fields it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PredictBy {
    /// Morph's task heads on an embedding model: `task` required, texts only.
    TaskHeads,
    /// A sequence-classification model's own head: no `task` or service class.
    OwnHead,
    /// Either, by the model the call reaches (a several-model server's).
    Either,
    /// Nothing: the server generates.
    Nothing,
}

impl PredictBy {
    /// The fields of `/predict`'s body this way of answering refuses.
    fn refused(self) -> &'static [&'static str] {
        match self {
            PredictBy::TaskHeads => &["raw_scores", "parameters"],
            PredictBy::OwnHead => &["task", "slo_ms", "utility"],
            PredictBy::Either | PredictBy::Nothing => &[],
        }
    }

    /// How a server of two models, one answering as `self` and one as `other`, reads `/predict`.
    fn join(self, other: Self) -> Self {
        match (self, other) {
            (PredictBy::Nothing, by) | (by, PredictBy::Nothing) => by,
            (a, b) if a == b => a,
            _ => PredictBy::Either,
        }
    }
}

impl ServedFacts {
    /// What a server of `models` takes: a value any of them takes (each model's own checks still
    /// refuse what is not its own: another's vector size, a batch over its own limit).
    pub(crate) fn joined(models: &[ServedFacts]) -> ServedFacts {
        let mut all = ServedFacts {
            names: Vec::new(),
            batch: 0,
            dimensions: Vec::new(),
            prompt_names: Vec::new(),
            encoder_vocabulary: None,
            decoder_vocabulary: None,
            root_bodies: Vec::new(),
            predict: PredictBy::Nothing,
            model_on_every_route: true,
        };
        for model in models {
            all.names.extend(model.names.iter().cloned());
            all.batch = all.batch.max(model.batch);
            all.encoder_vocabulary = all.encoder_vocabulary.max(model.encoder_vocabulary);
            all.decoder_vocabulary = all.decoder_vocabulary.max(model.decoder_vocabulary);
            all.predict = all.predict.join(model.predict);
            add_new(&mut all.dimensions, &model.dimensions);
            add_new(&mut all.prompt_names, &model.prompt_names);
            add_new(&mut all.root_bodies, &model.root_bodies);
        }
        all
    }
}

/// Appends the items of `more` that `list` lacks, in their order.
fn add_new<T: Clone + PartialEq>(list: &mut Vec<T>, more: &[T]) {
    for item in more {
        if !list.contains(item) {
            list.push(item.clone());
        }
    }
}

#[cfg(test)]
impl ServedFacts {
    /// MiniLM's, on an embedding server with task heads and batches of 8.
    pub(crate) fn example() -> Self {
        Self {
            names: vec!["all-MiniLM-L6-v2".into()],
            batch: 8,
            dimensions: vec![384],
            prompt_names: Vec::new(),
            encoder_vocabulary: Some(30_522),
            decoder_vocabulary: None,
            root_bodies: vec!["EmbedRequest", "SimilarityRequest"],
            predict: PredictBy::TaskHeads,
            model_on_every_route: false,
        }
    }

    /// A cross-encoder's of `dimension`-wide vectors, named `reranker`.
    pub(crate) fn example_reranker(dimension: usize) -> Self {
        Self {
            names: vec!["reranker".into()],
            dimensions: vec![dimension],
            root_bodies: vec!["RerankRequest"],
            predict: PredictBy::OwnHead,
            ..Self::example()
        }
    }

    /// SmolLM2's, on a generation server, named `smollm2`.
    pub(crate) fn example_decoder() -> Self {
        Self {
            names: vec!["smollm2".into()],
            dimensions: Vec::new(),
            encoder_vocabulary: None,
            decoder_vocabulary: Some(49_152),
            root_bodies: Vec::new(),
            predict: PredictBy::Nothing,
            ..Self::example()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_models_take_what_any_of_them_takes() {
        let embedder = ServedFacts {
            names: vec!["minilm".into(), "text-embedding-3-small".into()],
            prompt_names: vec!["query".into()],
            ..ServedFacts::example()
        };
        let reranker = ServedFacts { batch: 32, ..ServedFacts::example_reranker(384) };
        let decoder = ServedFacts::example_decoder();
        let all = ServedFacts::joined(&[embedder, reranker, decoder.clone()]);
        assert_eq!(all.names, ["minilm", "text-embedding-3-small", "reranker", "smollm2"]);
        assert_eq!((all.batch, all.dimensions), (32, vec![384]));
        // Each route's token ids are its own kind's: the encoders' and the decoder's.
        assert_eq!((all.encoder_vocabulary, all.decoder_vocabulary), (Some(30_522), Some(49_152)));
        assert_eq!(all.prompt_names, ["query"]);
        assert_eq!(all.root_bodies, ["EmbedRequest", "SimilarityRequest", "RerankRequest"]);
        assert_eq!(all.predict, PredictBy::Either);
        assert!(all.model_on_every_route);
        // A decoder beside one classifier: `/predict` as the classifier reads it.
        let classifier = ServedFacts { predict: PredictBy::OwnHead, ..ServedFacts::example() };
        assert_eq!(ServedFacts::joined(&[decoder, classifier]).predict, PredictBy::OwnHead);
    }
}
