//! A sequence-classification checkpoint's answers: each text or pair run through the driver as
//! any embedding is (pooled at its first token), then scored by the checkpoint's own head
//! ([`morph_encoder::SequenceClassifier`]).

use morph_encoder::Scoring;

use super::embed::Embedder;
use super::valid::{EmbedInputs, Sequence, Truncation};
use crate::error::CallError;

/// A scoring call: texts or pairs (from `field`), whether to cut long ones, how to score the
/// head's logits,.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidScore {
    pub sequences: Vec<Sequence>,
    pub field: &'static str,
    pub truncate: bool,
    pub scoring: Scoring,
}

/// Per input, a score per label (in the head's label order); and the call's token count.
#[derive(Debug)]
pub struct Scored {
    pub scores: Vec<Vec<f32>>,
    pub labels: Vec<String>,
    pub tokens: usize,
}

impl Embedder {
    /// Scores the call's inputs with the checkpoint's head; an embedding server answers what it
    /// serves instead.
    pub async fn score(&self, call: ValidScore) -> Result<Scored, CallError> {
        let Some(head) = self.classifier.clone() else {
            return Err(CallError::WrongEndpoint {
                served: "embeddings (its model is no sequence-classification checkpoint): use /embed or /v1/embeddings",
            });
        };
        let inputs = EmbedInputs::Sequences(call.sequences);
        let (pooled, tokens) = self.pool(inputs, call.field, Truncation::end_if(call.truncate), None).await?;
        let scores = pooled.iter().map(|p| head.scores(&head.logits(&p.vector), call.scoring)).collect();
        Ok(Scored { scores, labels: head.labels().to_vec(), tokens })
    }
}
