//! The embedding routes' answers.

use base64::Engine as _;
use serde::Serialize;
use utoipa::ToSchema;

use super::validate::EncodingFormat;
use crate::api::answers::Usage;

/// `POST /v1/embeddings`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct EmbeddingsResponse {
    pub object: &'static str,
    pub data: Vec<Embedding>,
    pub model: String,
    pub usage: Usage,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Embedding {
    pub object: &'static str,
    pub index: usize,
    pub embedding: EmbeddingVector,
}

/// A vector as the call's `encoding_format` asks: numbers, or its little-endian f32 bytes in
/// base64.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub(crate) enum EmbeddingVector {
    Float(Vec<f32>),
    Base64(String),
}

impl EmbeddingVector {
    pub(crate) fn encode(vector: Vec<f32>, format: EncodingFormat) -> Self {
        match format {
            EncodingFormat::Float => EmbeddingVector::Float(vector),
            EncodingFormat::Base64 => {
                let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
                EmbeddingVector::Base64(base64::engine::general_purpose::STANDARD.encode(bytes))
            }
        }
    }
}

/// `POST /embed`: one vector per input.
pub(crate) type EmbedResponse = Vec<Vec<f32>>;
