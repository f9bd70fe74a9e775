//! Requests as sent into checked values (`Valid*`), before any work: what is missing, empty, too
//! many or out of bounds is refused with a message that names the field.

use morph_decoder::{Message, SamplingParams};

use super::fields::{ChatMessage, Flag, Messages, Number, Text, Texts};
use super::requests::{ClassifyRequest, EmbedRequest, EmbeddingsRequest, GenerationRequest, PredictRequest};
use crate::error::ApiError;
use crate::infer::{GenerationFormat, Prompt, ValidClassify, ValidEmbed, ValidGeneration};

pub fn embeddings(r: EmbeddingsRequest, max_items: usize, served: &str) -> Result<ValidEmbed, ApiError> {
    let texts = texts("input", r.input, max_items)?;
    served_model(r.model, served)?;
    if let Some(Text(format)) = r.encoding_format
        && format != "float"
    {
        return Err(ApiError::validation("encoding_format", "only \"float\" is supported"));
    }
    Ok(ValidEmbed { texts, field: "input", truncate: flag(r.truncate, false), normalize: true })
}

pub fn embed(r: EmbedRequest, max_items: usize) -> Result<ValidEmbed, ApiError> {
    let texts = texts("inputs", r.inputs, max_items)?;
    Ok(ValidEmbed {
        texts,
        field: "inputs",
        normalize: flag(r.normalize, true),
        truncate: flag(r.truncate, false),
    })
}

pub fn classify(r: ClassifyRequest, max_items: usize) -> Result<ValidClassify, ApiError> {
    service("input", (r.task, r.input, r.slo_ms, r.utility, r.truncate), max_items)
}

pub fn predict(r: PredictRequest, max_items: usize) -> Result<ValidClassify, ApiError> {
    service("inputs", (r.task, r.inputs, r.slo_ms, r.utility, r.truncate), max_items)
}

/// A classification call's fields (task, inputs from `field`, SLO, utility, truncate).
type ServiceFields = (Option<Text>, Option<Texts>, Option<Number>, Option<Number>, Option<Flag>);

fn service(
    field: &'static str,
    (task, input, slo_ms, utility, truncate): ServiceFields,
    max_items: usize,
) -> Result<ValidClassify, ApiError> {
    let Some(Text(task)) = task else { return Err(ApiError::validation("task", "is required")) };
    Ok(ValidClassify {
        task,
        texts: texts(field, input, max_items)?,
        field,
        slo_ms: optional_number_in("slo_ms", slo_ms, 0.0, 86_400_000.0)?,
        utility: number_in("utility", utility, 1.0, 0.0, 1e6)?,
        truncate: flag(truncate, false),
    })
}

/// A generation call in `format`, on a decoder whose context holds `context` tokens.
pub fn generation(
    r: GenerationRequest,
    format: GenerationFormat,
    served: &str,
    context: usize,
) -> Result<ValidGeneration, ApiError> {
    served_model(r.model, served)?;
    let prompt = match format {
        GenerationFormat::Completion => Prompt::Text(texts("prompt", r.prompt, 1)?.remove(0)),
        GenerationFormat::Chat => Prompt::Chat(messages(r.messages)?),
    };
    let max_tokens_given = r.max_tokens.is_some();
    let max_tokens = number_in("max_tokens", r.max_tokens, 128.0, 1.0, context as f64)? as u32;
    let temperature = number_in("temperature", r.temperature, 1.0, 0.0, 2.0)? as f32;
    let top_p = number_in("top_p", r.top_p, 1.0, 1e-6, 1.0)? as f32;
    // Without a seed each call draws its own, so repeated calls sample afresh.
    let seed = optional_number_in("seed", r.seed, 0.0, 9.0e15)?.map_or_else(rand::random, |s| s as u64);
    Ok(ValidGeneration {
        prompt,
        max_tokens,
        max_tokens_given,
        sampling: SamplingParams { temperature, top_p, seed },
        stream: flag(r.stream, false),
    })
}

/// `model`, when given, must be the one served.
fn served_model(model: Option<Text>, served: &str) -> Result<(), ApiError> {
    match model {
        Some(Text(asked)) if asked != served => Err(ApiError::UnknownModel { asked, served: served.into() }),
        _ => Ok(()),
    }
}

/// A string or a non-empty array of strings, none empty, at most `max_items` of them.
fn texts(field: &str, value: Option<Texts>, max_items: usize) -> Result<Vec<String>, ApiError> {
    match value {
        None => Err(ApiError::validation(field, "is required")),
        Some(Texts::One(text)) if text.is_empty() => Err(ApiError::validation(field, "must not be empty")),
        Some(Texts::One(text)) => Ok(vec![text]),
        Some(Texts::Many(items)) if items.is_empty() => {
            Err(ApiError::validation(field, "must not be an empty array"))
        }
        Some(Texts::Many(items)) if items.len() > max_items => Err(ApiError::validation(
            field,
            format!("has {} items; at most {max_items} per call", items.len()),
        )),
        Some(Texts::Many(items)) => match items.iter().position(String::is_empty) {
            Some(i) => Err(ApiError::validation(format!("{field}[{i}]"), "must not be empty")),
            None => Ok(items),
        },
    }
}

/// `messages`: a non-empty array of `{role, content}` strings.
fn messages(value: Option<Messages>) -> Result<Vec<Message>, ApiError> {
    let list = match value {
        None => return Err(ApiError::validation("messages", "is required")),
        Some(Messages(list)) if list.is_empty() => {
            return Err(ApiError::validation("messages", "must not be empty"));
        }
        Some(Messages(list)) => list,
    };
    list.into_iter()
        .enumerate()
        .map(|(i, ChatMessage { role, content })| {
            let part = |name: &str, value: Option<Text>| {
                value
                    .map(|Text(t)| t)
                    .ok_or_else(|| ApiError::validation(format!("messages[{i}].{name}"), "must be a string"))
            };
            let role = part("role", role)?;
            Ok(Message { role, content: part("content", content)? })
        })
        .collect()
}

fn flag(value: Option<Flag>, default: bool) -> bool {
    value.map_or(default, |Flag(b)| b)
}

/// A number in `min..=max`, `default` when absent.
fn number_in(field: &str, value: Option<Number>, default: f64, min: f64, max: f64) -> Result<f64, ApiError> {
    Ok(optional_number_in(field, value, min, max)?.unwrap_or(default))
}

/// A number in `min..=max`, or `None` when absent.
fn optional_number_in(
    field: &str,
    value: Option<Number>,
    min: f64,
    max: f64,
) -> Result<Option<f64>, ApiError> {
    match value {
        None => Ok(None),
        Some(Number(v)) if (min..=max).contains(&v) => Ok(Some(v)),
        Some(_) => Err(ApiError::validation(field, format!("must be between {min} and {max}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::super::fields::parse;
    use super::*;

    fn embed_error(body: &str, max_items: usize) -> String {
        let r: EmbeddingsRequest = match parse(body.as_bytes()) {
            Ok(r) => r,
            Err(e) => return e.to_string(),
        };
        embeddings(r, max_items, "m").unwrap_err().to_string()
    }

    #[test]
    fn texts_are_a_string_or_strings_and_the_bad_field_is_named() {
        let ok = |body: &str| embeddings(parse(body.as_bytes()).unwrap(), 4, "m").unwrap().texts;
        assert_eq!(ok(r#"{"input": "a"}"#), vec!["a"]);
        assert_eq!(ok(r#"{"input": ["a", "b"], "model": "m"}"#), vec!["a", "b"]);
        assert_eq!(embed_error("{}", 2), "input: is required");
        assert_eq!(embed_error(r#"{"input": ""}"#, 2), "input: must not be empty");
        assert_eq!(embed_error(r#"{"input": []}"#, 2), "input: must not be an empty array");
        assert_eq!(embed_error(r#"{"input": ["a", 3]}"#, 2), "input[1]: must be a string");
        assert_eq!(embed_error(r#"{"input": ["a", ""]}"#, 2), "input[1]: must not be empty");
        assert_eq!(embed_error(r#"{"input": 7}"#, 2), "input: must be a string or an array of strings");
        assert_eq!(embed_error(r#"{"input": ["a", "b", "c"]}"#, 2), "input: has 3 items; at most 2 per call");
        assert!(embed_error(r#"{"input": "a", "model": "gpt"}"#, 2).contains("model 'gpt' is not served"));
        assert!(
            embed_error(r#"{"input": "a", "encoding_format": "base64"}"#, 2).starts_with("encoding_format:")
        );
    }

    #[test]
    fn generation_settings_are_bounded_and_messages_need_both_parts() {
        let gen_error = |body: &str, format| {
            generation(parse(body.as_bytes()).unwrap(), format, "m", 2048).unwrap_err().to_string()
        };
        let chat = GenerationFormat::Chat;
        assert_eq!(gen_error(r#"{"messages": []}"#, chat), "messages: must not be empty");
        assert_eq!(
            gen_error(r#"{"messages": [{"role": "user"}]}"#, chat),
            "messages[0].content: must be a string"
        );
        let completion = GenerationFormat::Completion;
        assert_eq!(
            gen_error(r#"{"prompt": "hi", "max_tokens": 0}"#, completion),
            "max_tokens: must be between 1 and 2048"
        );
        assert_eq!(
            gen_error(r#"{"prompt": "hi", "temperature": -1}"#, completion),
            "temperature: must be between 0 and 2"
        );
        assert_eq!(
            gen_error(r#"{"prompt": ["a", "b"]}"#, completion),
            "prompt: has 2 items; at most 1 per call"
        );
        let ok =
            generation(parse(br#"{"prompt": "hi", "seed": 7}"#).unwrap(), completion, "m", 2048).unwrap();
        assert_eq!((ok.max_tokens, ok.max_tokens_given, ok.sampling.seed, ok.stream), (128, false, 7, false));
    }
}
