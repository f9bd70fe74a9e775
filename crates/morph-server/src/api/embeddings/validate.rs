//! The embedding routes' bodies checked into the work they ask for.

use super::requests::{EmbedRequest, EmbeddingsRequest, SimilarityInputs, SimilarityRequest};
use crate::api::bounds::Switch;
use crate::api::checks::{inputs, log_user, served_model, texts, truncation};
use crate::api::field_types::{Normalize, Truncate};
use crate::api::fields::{Number, Text, Texts};
use crate::api::opening::Check;
use crate::api::{AppState, ServedModel};
use crate::error::CallError;
use crate::infer::{EmbedInputs, Truncation, ValidEmbed};
use crate::prompts::ServedPrompts;

impl Check for EmbeddingsRequest {
    type Valid = EmbeddingsCall;

    fn check(self, state: &AppState) -> Result<EmbeddingsCall, CallError> {
        embeddings(self, state.max_client_batch, &state.model)
    }
}

impl Check for EmbedRequest {
    type Valid = ValidEmbed;

    fn check(self, state: &AppState) -> Result<ValidEmbed, CallError> {
        embed(self, state.max_client_batch, &state.model)
    }
}

impl Check for SimilarityRequest {
    type Valid = ValidEmbed;

    fn check(self, state: &AppState) -> Result<ValidEmbed, CallError> {
        similarity(self, state.max_client_batch, &state.model.prompts)
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

/// `/v1/embeddings` on a server that serves `model` (the server's default prompt before each
/// text: OpenAI's call names none).
fn embeddings(
    r: EmbeddingsRequest,
    max_items: usize,
    model: &ServedModel,
) -> Result<EmbeddingsCall, CallError> {
    let inputs = model.prompts.apply("input", None, inputs("input", r.input, max_items)?)?;
    served_model(r.model, &model.names)?;
    let encoding = match r.encoding_format.map(|Text(f)| f) {
        None => EncodingFormat::Float,
        Some(f) if f == "float" => EncodingFormat::Float,
        Some(f) if f == "base64" => EncodingFormat::Base64,
        Some(_) => return Err(CallError::validation("encoding_format", "must be \"float\" or \"base64\"")),
    };
    own_dimensions(r.dimensions, model.dim)?;
    log_user("/v1/embeddings", r.user);
    let truncate = Truncation::end_if(Truncate::read(r.truncate));
    let embed = ValidEmbed { inputs, field: "input", truncate, normalize: true };
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

/// TEI's `/embed` on `model`.
fn embed(r: EmbedRequest, max_items: usize, model: &ServedModel) -> Result<ValidEmbed, CallError> {
    let truncate = truncation(r.truncate, r.truncation_direction)?;
    own_dimensions(r.dimensions, model.dim)?;
    Ok(ValidEmbed {
        inputs: model.prompts.apply("prompt_name", r.prompt_name, inputs("inputs", r.inputs, max_items)?)?,
        field: "inputs",
        normalize: Normalize::read(r.normalize),
        truncate,
    })
}

/// TEI's `/similarity`: the source sentence first, then the sentences, as one embedding call
/// of unit vectors (their products are the cosines).
fn similarity(
    r: SimilarityRequest,
    max_items: usize,
    prompts: &ServedPrompts,
) -> Result<ValidEmbed, CallError> {
    let (mut truncate, mut direction, mut prompt_name) = (r.truncate, r.truncation_direction, None);
    if let Some(parameters) = r.parameters {
        prompt_name = parameters.prompt_name;
        truncate = parameters.truncate.or(truncate);
        direction = parameters.truncation_direction.or(direction);
    }
    let truncate = truncation(truncate, direction)?;
    let Some(SimilarityInputs { source_sentence, sentences }) = r.inputs else {
        return Err(CallError::validation("inputs", "is required"));
    };
    let source = texts("inputs.source_sentence", source_sentence.map(|Text(t)| Texts::One(t)), 1)?;
    let sentences = texts("inputs.sentences", sentences, max_items.saturating_sub(1).max(1))?;
    let texts = EmbedInputs::Texts([source, sentences].concat());
    Ok(ValidEmbed {
        inputs: prompts.apply("parameters.prompt_name", prompt_name, texts)?,
        field: "inputs.sentences",
        truncate,
        normalize: Normalize::DEFAULT,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::fields::parse;
    use morph_encoder::sentence_config::Prompts;

    /// A model of 384 dimensions named "m", with `prompts`.
    fn served(prompts: ServedPrompts) -> ServedModel {
        ServedModel {
            names: vec!["m".into()],
            created: 0,
            dim: 384,
            pooling: None,
            engine: "candle".into(),
            dtype: "float32",
            max_input_len: 512,
            prompts,
        }
    }

    fn embed_call(body: &str, max_items: usize) -> Result<EmbeddingsCall, String> {
        let r: EmbeddingsRequest = parse(body.as_bytes()).map_err(|e| e.to_string())?;
        embeddings(r, max_items, &served(ServedPrompts::default())).map_err(|e| e.to_string())
    }

    /// TEI's `/embed` takes TEI's fields, with the values this server serves.
    #[test]
    fn tei_embed_takes_its_fields_with_the_values_served() {
        let embed_with = |body: &str| -> Result<(), String> {
            let r: EmbedRequest = parse(body.as_bytes()).map_err(|e| e.to_string())?;
            embed(r, 2, &served(ServedPrompts::default())).map(|_| ()).map_err(|e| e.to_string())
        };
        let served =
            r#"{"inputs": "a", "truncation_direction": "Right", "prompt_name": null, "dimensions": 384}"#;
        assert_eq!(embed_with(served), Ok(()));
        for (body, expected) in [
            (
                r#"{"inputs": "a", "truncation_direction": "middle"}"#,
                "truncation_direction: must be \"right\" or \"left\"",
            ),
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

    /// A prompt goes before each text: the one the call names, else the server's default;
    /// token ids stay as given.
    #[test]
    fn prompts_go_before_texts_as_named_or_by_default() {
        let config = r#"{"prompts": {"query": "query: ", "passage": "passage: "}}"#;
        let prompts = |default: Option<&str>| {
            let config = serde_json::from_str(config).expect("prompts");
            ServedPrompts::new(config, default.map(str::to_string), true).expect("served")
        };
        let texts = |t: &[&str]| EmbedInputs::Texts(t.iter().map(|s| s.to_string()).collect());
        let embed_with = |body: &str, model: &ServedModel| -> Result<EmbedInputs, String> {
            let r: EmbedRequest = parse(body.as_bytes()).map_err(|e| e.to_string())?;
            embed(r, 2, model).map(|v| v.inputs).map_err(|e| e.to_string())
        };
        let plain = served(prompts(None));
        assert_eq!(embed_with(r#"{"inputs": ["a", "b"]}"#, &plain), Ok(texts(&["a", "b"])));
        let named = r#"{"inputs": ["a", "b"], "prompt_name": "query"}"#;
        assert_eq!(embed_with(named, &plain), Ok(texts(&["query: a", "query: b"])));
        let err = embed_with(r#"{"inputs": "a", "prompt_name": "doc"}"#, &plain).unwrap_err();
        assert!(
            err.contains("prompt_name: \"doc\" is not one of the model's prompts: passage, query"),
            "{err}"
        );
        let err = embed_with(r#"{"inputs": [101, 102], "prompt_name": "query"}"#, &plain).unwrap_err();
        assert!(err.contains("token ids are embedded as given"), "{err}");

        let by_default = served(prompts(Some("query")));
        let openai = |body: &str| {
            let r: EmbeddingsRequest = parse(body.as_bytes()).expect("parses");
            embeddings(r, 2, &by_default).map(|c| c.embed.inputs).map_err(|e| e.to_string())
        };
        assert_eq!(openai(r#"{"input": "a"}"#), Ok(texts(&["query: a"])));
        assert_eq!(openai(r#"{"input": [101, 102]}"#), Ok(EmbedInputs::Tokens(vec![vec![101, 102]])));
        let passage = r#"{"inputs": "a", "prompt_name": "passage"}"#;
        assert_eq!(embed_with(passage, &by_default), Ok(texts(&["passage: a"])));
        let similar: SimilarityRequest = parse(
            r#"{"inputs": {"source_sentence": "s", "sentences": ["t"]}, "parameters": {"prompt_name": "passage"}}"#.as_bytes(),
        )
        .expect("parses");
        let inputs = similarity(similar, 4, &by_default.prompts).expect("valid").inputs;
        assert_eq!(inputs, texts(&["passage: s", "passage: t"]));

        // A model whose pooling leaves the prompt's tokens out serves none.
        let unpooled =
            served(ServedPrompts::new(serde_json::from_str(config).unwrap(), None, false).unwrap());
        let err = embed_with(named, &unpooled).unwrap_err();
        assert!(err.contains("include_prompt false"), "{err}");
        assert_eq!(embed_with(r#"{"inputs": "a"}"#, &unpooled), Ok(texts(&["a"])));
        let refused = ServedPrompts::new(serde_json::from_str(config).unwrap(), Some("query".into()), false);
        assert!(refused.unwrap_err().contains("include_prompt false"));
        let unknown = ServedPrompts::new(Prompts::default(), Some("query".into()), true).unwrap_err();
        assert!(
            unknown.contains("--default-prompt-name query: \"query\": this model has no prompts"),
            "{unknown}"
        );
    }

    /// TEI's `truncate` with its side: the end by default, the start with "left".
    #[test]
    fn a_long_text_is_cut_at_the_side_asked_or_refused() {
        let truncation = |body: &str| {
            let r: EmbedRequest = parse(body.as_bytes()).expect("parses");
            embed(r, 2, &served(ServedPrompts::default())).expect("valid").truncate
        };
        assert_eq!(truncation(r#"{"inputs": "a"}"#), Truncation::Refuse);
        assert_eq!(truncation(r#"{"inputs": "a", "truncation_direction": "left"}"#), Truncation::Refuse);
        assert_eq!(truncation(r#"{"inputs": "a", "truncate": true}"#), Truncation::End);
        let left = r#"{"inputs": "a", "truncate": true, "truncation_direction": "Left"}"#;
        assert_eq!(truncation(left), Truncation::Start);
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
        // A whole number written with a fraction is an id, as JSON Schema reads it; 2.5 is not.
        assert_eq!(
            embed_error(r#"{"input": [1.0, 2.5]}"#, 2),
            "input[1]: must be a token id (an integer from 0)"
        );
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
