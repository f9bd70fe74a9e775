//! The embedding routes' bodies checked into the work they ask for.

use super::requests::{EmbedRequest, EmbeddingsRequest, SimilarityInputs, SimilarityRequest};
use crate::api::AppState;
use crate::api::bounds::Switch;
use crate::api::checks::{inputs, log_user, right_side, served_model, texts};
use crate::api::field_types::{Normalize, Truncate};
use crate::api::fields::{Number, Text, Texts};
use crate::api::opening::Check;
use crate::error::CallError;
use crate::infer::{EmbedInputs, ValidEmbed};

impl Check for EmbeddingsRequest {
    type Valid = EmbeddingsCall;

    fn check(self, state: &AppState) -> Result<EmbeddingsCall, CallError> {
        embeddings(self, state.max_client_batch, &state.model.names, state.model.dim)
    }
}

impl Check for EmbedRequest {
    type Valid = ValidEmbed;

    fn check(self, state: &AppState) -> Result<ValidEmbed, CallError> {
        embed(self, state.max_client_batch, state.model.dim)
    }
}

impl Check for SimilarityRequest {
    type Valid = ValidEmbed;

    fn check(self, state: &AppState) -> Result<ValidEmbed, CallError> {
        similarity(self, state.max_client_batch)
    }
}

/// How `/v1/embeddings` writes its vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EncodingFormat {
    /// Arrays of numbers.
    Float,
    /// Each vector's little-endian f32 bytes in base64 (the OpenAI SDK's default).
    Base64,
}

/// An OpenAI embeddings call: what to embed, and how to write the vectors.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EmbeddingsCall {
    pub embed: ValidEmbed,
    pub encoding: EncodingFormat,
}

/// `/v1/embeddings` on a server that serves `served`, whose vectors have `dim` dimensions.
fn embeddings(
    r: EmbeddingsRequest,
    max_items: usize,
    served: &[String],
    dim: usize,
) -> Result<EmbeddingsCall, CallError> {
    let inputs = inputs("input", r.input, max_items)?;
    served_model(r.model, served)?;
    let encoding = match r.encoding_format.map(|Text(f)| f) {
        None => EncodingFormat::Float,
        Some(f) if f == "float" => EncodingFormat::Float,
        Some(f) if f == "base64" => EncodingFormat::Base64,
        Some(_) => return Err(CallError::validation("encoding_format", "must be \"float\" or \"base64\"")),
    };
    own_dimensions(r.dimensions, dim)?;
    log_user("/v1/embeddings", r.user);
    let embed = ValidEmbed { inputs, field: "input", truncate: Truncate::read(r.truncate), normalize: true };
    Ok(EmbeddingsCall { embed, encoding })
}

/// `dimensions`, when given, must be the model's own `dim`.
fn own_dimensions(dimensions: Option<Number>, dim: usize) -> Result<(), CallError> {
    match dimensions {
        Some(Number(asked)) if asked != dim as f64 => {
            let message = format!(
                "this model's vectors have {dim} dimensions and were not trained to be cut shorter \
                 (Matryoshka): ask for {dim} or leave it out"
            );
            Err(CallError::validation("dimensions", message))
        }
        _ => Ok(()),
    }
}

/// TEI's `prompt_name` (at `field`): only null, as the models served have no prompts.
fn no_prompt(field: &str, prompt_name: Option<Text>) -> Result<(), CallError> {
    match prompt_name {
        Some(Text(name)) => {
            let message = format!("{name:?}: this model has no prompts (leave it out or null)");
            Err(CallError::validation(field, message))
        }
        None => Ok(()),
    }
}

/// TEI's `/embed` on a model whose vectors have `dim` dimensions.
fn embed(r: EmbedRequest, max_items: usize, dim: usize) -> Result<ValidEmbed, CallError> {
    right_side(r.truncation_direction)?;
    no_prompt("prompt_name", r.prompt_name)?;
    own_dimensions(r.dimensions, dim)?;
    Ok(ValidEmbed {
        inputs: inputs("inputs", r.inputs, max_items)?,
        field: "inputs",
        normalize: Normalize::read(r.normalize),
        truncate: Truncate::read(r.truncate),
    })
}

/// TEI's `/similarity`: the source sentence first, then the sentences, as one embedding call
/// of unit vectors (their products are the cosines).
fn similarity(r: SimilarityRequest, max_items: usize) -> Result<ValidEmbed, CallError> {
    let (mut truncate, mut direction) = (r.truncate, r.truncation_direction);
    if let Some(parameters) = r.parameters {
        no_prompt("parameters.prompt_name", parameters.prompt_name)?;
        truncate = parameters.truncate.or(truncate);
        direction = parameters.truncation_direction.or(direction);
    }
    right_side(direction)?;
    let Some(SimilarityInputs { source_sentence, sentences }) = r.inputs else {
        return Err(CallError::validation("inputs", "is required"));
    };
    let source = texts("inputs.source_sentence", source_sentence.map(|Text(t)| Texts::One(t)), 1)?;
    let sentences = texts("inputs.sentences", sentences, max_items.saturating_sub(1).max(1))?;
    Ok(ValidEmbed {
        inputs: EmbedInputs::Texts([source, sentences].concat()),
        field: "inputs.sentences",
        truncate: Truncate::read(truncate),
        normalize: Normalize::DEFAULT,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::fields::parse;

    fn embed_call(body: &str, max_items: usize) -> Result<EmbeddingsCall, String> {
        let r: EmbeddingsRequest = parse(body.as_bytes()).map_err(|e| e.to_string())?;
        embeddings(r, max_items, &["m".to_string()], 384).map_err(|e| e.to_string())
    }

    /// TEI's `/embed` takes TEI's fields, with the values this server serves.
    #[test]
    fn tei_embed_takes_its_fields_with_the_values_served() {
        let embed_with = |body: &str| -> Result<(), String> {
            let r: EmbedRequest = parse(body.as_bytes()).map_err(|e| e.to_string())?;
            embed(r, 2, 384).map(|_| ()).map_err(|e| e.to_string())
        };
        let served =
            r#"{"inputs": "a", "truncation_direction": "Right", "prompt_name": null, "dimensions": 384}"#;
        assert_eq!(embed_with(served), Ok(()));
        for (body, expected) in [
            (r#"{"inputs": "a", "truncation_direction": "Left"}"#, "truncation_direction: only \"right\""),
            (
                r#"{"inputs": "a", "prompt_name": "query"}"#,
                "prompt_name: \"query\": this model has no prompts",
            ),
            (r#"{"inputs": "a", "dimensions": 128}"#, "dimensions: this model's vectors have 384"),
        ] {
            let err = embed_with(body).expect_err("refused");
            assert!(err.starts_with(expected), "{body}: {err}");
        }
    }

    fn embed_error(body: &str, max_items: usize) -> String {
        embed_call(body, max_items).unwrap_err()
    }

    #[test]
    fn inputs_are_texts_or_token_ids_and_the_bad_field_is_named() {
        let ok = |body: &str| embed_call(body, 4).unwrap().embed.inputs;
        let texts = |t: &[&str]| EmbedInputs::Texts(t.iter().map(|s| s.to_string()).collect());
        assert_eq!(ok(r#"{"input": "a"}"#), texts(&["a"]));
        assert_eq!(ok(r#"{"input": ["a", "b"], "model": "m"}"#), texts(&["a", "b"]));
        assert_eq!(ok(r#"{"input": [101, 7592, 102]}"#), EmbedInputs::Tokens(vec![vec![101, 7592, 102]]));
        assert_eq!(ok(r#"{"input": [[101, 102], [5]]}"#), EmbedInputs::Tokens(vec![vec![101, 102], vec![5]]));
        assert_eq!(embed_error("{}", 2), "input: is required");
        assert_eq!(embed_error(r#"{"input": ""}"#, 2), "input: must not be empty");
        assert_eq!(embed_error(r#"{"input": []}"#, 2), "input: must not be an empty array");
        assert_eq!(embed_error(r#"{"input": ["a", 3]}"#, 2), "input[1]: must be a string");
        assert_eq!(
            embed_error(r#"{"input": [1, "a"]}"#, 2),
            "input[1]: must be a token id (an integer from 0)"
        );
        assert_eq!(embed_error(r#"{"input": [[1], []]}"#, 2), "input[1]: must not be an empty array");
        assert_eq!(
            embed_error(r#"{"input": [-1]}"#, 2),
            "input[0]: must be a string, a token id or an array of token ids"
        );
        assert_eq!(embed_error(r#"{"input": ["a", ""]}"#, 2), "input[1]: must not be empty");
        assert_eq!(
            embed_error(r#"{"input": 7}"#, 2),
            "input: must be a string, an array of strings, an array of token ids or an array of arrays of token ids"
        );
        assert_eq!(embed_error(r#"{"input": ["a", "b", "c"]}"#, 2), "input: has 3 items; at most 2 per call");
        assert!(embed_error(r#"{"input": "a", "model": "gpt"}"#, 2).contains("model 'gpt' is not served"));
    }

    #[test]
    fn encoding_dimensions_and_unknown_fields_are_honoured_or_refused_by_name() {
        let encoding = |body: &str| embed_call(body, 2).unwrap().encoding;
        assert_eq!(encoding(r#"{"input": "a"}"#), EncodingFormat::Float);
        assert_eq!(encoding(r#"{"input": "a", "encoding_format": "base64"}"#), EncodingFormat::Base64);
        assert!(
            embed_error(r#"{"input": "a", "encoding_format": "int8"}"#, 2).starts_with("encoding_format:")
        );
        assert!(embed_call(r#"{"input": "a", "dimensions": 384, "user": "u"}"#, 2).is_ok());
        assert!(
            embed_error(r#"{"input": "a", "dimensions": 128}"#, 2)
                .starts_with("dimensions: this model's vectors have 384")
        );
        let unknown = embed_error(r#"{"input": "a", "prompt_name": "query"}"#, 2);
        assert!(
            unknown.starts_with("prompt_name: is not supported by this server (expected one of `input`"),
            "{unknown}"
        );
    }
}
