//! Cohere's bodies checked; what needs the model's tokenizer (cutting each text to a number of
//! tokens) is left to the handlers.

use super::embedding_types::EmbeddingType;
use super::requests::{CohereEmbedRequest, CohereRerankRequest, EMBEDDING_TYPES, INPUT_TYPES};
use crate::api::AppState;
use crate::api::checks::{served_model, texts};
use crate::api::fields::{Flag, Number, Text};
use crate::api::opening::Check;
use crate::api::scores::pair_fields::Document;
use crate::api::scores::requests::DocumentRerankRequest;
use crate::error::CallError;
use crate::infer::Truncation;

/// A `/v2/rerank` call: its documents as sent, and the rerank they make once each is cut to
/// `max_tokens_per_doc`.
pub(crate) struct CohereRerank {
    pub documents: Vec<String>,
    pub max_tokens_per_doc: Option<Number>,
    /// The call in Cohere's and Jina's `/v1/rerank` shape, its documents still to be set.
    pub rerank: DocumentRerankRequest,
}

impl Check for CohereRerankRequest {
    type Valid = CohereRerank;

    fn check(self, state: &AppState) -> Result<CohereRerank, CallError> {
        let documents = texts("documents", self.documents, state.max_client_batch)?;
        // Cohere cuts a long pair rather than refusing it.
        let rerank = DocumentRerankRequest {
            model: self.model,
            query: self.query,
            documents: None,
            top_n: self.top_n,
            return_documents: self.return_documents,
            truncate: Some(Flag(true)),
        };
        Ok(CohereRerank { documents, max_tokens_per_doc: self.max_tokens_per_doc, rerank })
    }
}

impl CohereRerank {
    /// The `/v1/rerank` call on `documents` (each cut as the call asked).
    pub(super) fn on(mut self, documents: Vec<String>) -> DocumentRerankRequest {
        self.rerank.documents = Some(documents.into_iter().map(Document).collect());
        self.rerank
    }
}

/// A `/v2/embed` or `/v1/embed` call: its texts (with the prompt its `input_type` stands for),
/// to be cut to `max_tokens` from the end `truncate` says.
pub(crate) struct CohereEmbed {
    pub texts: Vec<String>,
    pub max_tokens: Option<Number>,
    pub truncate: Truncation,
    /// `embedding_types`, when given.
    pub types: Option<Vec<EmbeddingType>>,
}

impl Check for CohereEmbedRequest {
    type Valid = CohereEmbed;

    fn check(self, state: &AppState) -> Result<CohereEmbed, CallError> {
        served_model(self.model, &state.model.names)?;
        let input_type = input_type(self.input_type)?;
        let truncate = truncate(self.truncate)?;
        let dimension = state.model.dim;
        if let Some(Number(n)) = self.output_dimension
            && n != dimension as f64
        {
            let message = format!("this model's vectors have {dimension} dimensions");
            return Err(CallError::validation("output_dimension", message));
        }
        let types = match self.embedding_types {
            None => None,
            Some(given) => Some(
                texts("embedding_types", Some(given), EMBEDDING_TYPES)?
                    .iter()
                    .map(|t| EmbeddingType::parse(t).map_err(|e| CallError::validation("embedding_types", e)))
                    .collect::<Result<Vec<_>, _>>()?,
            ),
        };
        let texts = texts("texts", self.texts, state.max_client_batch)?;
        let texts = state.model.prompts.for_input_type(input_type.as_deref(), texts);
        Ok(CohereEmbed { texts, max_tokens: self.max_tokens, truncate, types })
    }
}

fn input_type(given: Option<Text>) -> Result<Option<String>, CallError> {
    match given {
        Some(Text(kind)) if !INPUT_TYPES.contains(&kind.as_str()) => Err(CallError::validation(
            "input_type",
            format!("{kind:?} is not one of {} (text only)", INPUT_TYPES.join(", ")),
        )),
        given => Ok(given.map(|Text(kind)| kind)),
    }
}

/// Cohere's `truncate`: `END` (the default) cuts a long text's end, `START` its start, `NONE`
/// refuses it.
fn truncate(given: Option<Text>) -> Result<Truncation, CallError> {
    match given.as_ref().map(|Text(t)| t.as_str()) {
        None | Some("END") => Ok(Truncation::End),
        Some("START") => Ok(Truncation::Start),
        Some("NONE") => Ok(Truncation::Refuse),
        Some(_) => Err(CallError::validation("truncate", "must be \"NONE\", \"START\" or \"END\"")),
    }
}
