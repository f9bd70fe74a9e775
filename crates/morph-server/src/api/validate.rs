//! Requests as sent into checked values (`Valid*`), before any work: what is missing, empty, too
//! many or out of bounds is refused with a message that names the field.

use morph_decoder::{Message, SamplingParams};

use super::bounds::{Bounded, Switch};
use super::fields::{ChatMessage, Content, Flag, Inputs, Messages, Number, ROLES, Text, Texts, parse};
use super::pair_fields::PredictInputs;
use super::requests::{
    AddSpecialTokens, CHAT_ONLY, COMPLETION_ONLY, Choices, ClassifyRequest, CompletionLogprobs,
    DecodeRequest, EmbedRequest, EmbeddingsRequest, GenerationRequest, IncludeUsage, MaxTokens, MinP,
    Normalize, Penalty, PredictRequest, Seed, SkipSpecialTokens, SloMs, Stream, StreamOptions, Temperature,
    TokenizeRequest, TopK, TopLogprobs, TopP, Truncate, Utility,
};
use super::validate_output::{OutputFields, ToolShape, output};
use crate::error::CallError;
use crate::infer::{EmbedInputs, GenerationFormat, Prompt, ValidClassify, ValidEmbed, ValidGeneration};

/// How `/v1/embeddings` writes its vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncodingFormat {
    /// Arrays of numbers.
    Float,
    /// Each vector's little-endian f32 bytes in base64 (the OpenAI SDK's default).
    Base64,
}

/// An OpenAI embeddings call: what to embed, and how to write the vectors.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingsCall {
    pub embed: ValidEmbed,
    pub encoding: EncodingFormat,
}

/// Most stop strings in one call (OpenAI's limit).
const MAX_STOPS: usize = 4;

/// `/v1/embeddings` on a server that serves `served`, whose vectors have `dim` dimensions.
pub fn embeddings(
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
    if let Some(Number(asked)) = r.dimensions
        && asked != dim as f64
    {
        let message = format!(
            "this model's vectors have {dim} dimensions and were not trained to be cut shorter \
             (Matryoshka): ask for {dim} or leave it out"
        );
        return Err(CallError::validation("dimensions", message));
    }
    log_user("/v1/embeddings", r.user);
    let embed = ValidEmbed { inputs, field: "input", truncate: Truncate::read(r.truncate), normalize: true };
    Ok(EmbeddingsCall { embed, encoding })
}

pub fn embed(r: EmbedRequest, max_items: usize) -> Result<ValidEmbed, CallError> {
    Ok(ValidEmbed {
        inputs: inputs("inputs", r.inputs, max_items)?,
        field: "inputs",
        normalize: Normalize::read(r.normalize),
        truncate: Truncate::read(r.truncate),
    })
}

/// `/tokenize`: the texts, and whether to add the special tokens.
pub fn tokenize(r: TokenizeRequest, max_items: usize) -> Result<(Vec<String>, bool), CallError> {
    Ok((texts("inputs", r.inputs, max_items)?, AddSpecialTokens::read(r.add_special_tokens)))
}

/// `/decode`: the token id lists, and whether to leave the special tokens out.
pub fn decode(r: DecodeRequest, max_items: usize) -> Result<(Vec<Vec<u32>>, bool), CallError> {
    let ids = match inputs("ids", r.ids, max_items)? {
        EmbedInputs::Tokens(ids) => ids,
        EmbedInputs::Texts(_) | EmbedInputs::Sequences(_) => {
            return Err(CallError::validation("ids", "must be an array of token ids, or an array of them"));
        }
    };
    Ok((ids, SkipSpecialTokens::read(r.skip_special_tokens)))
}

pub fn classify(r: ClassifyRequest, max_items: usize) -> Result<ValidClassify, CallError> {
    service("input", (r.task, r.input, r.slo_ms, r.utility, r.truncate), max_items)
}

/// `/predict` for one of Morph's task heads: a string or an array of strings (a batch).
pub fn predict(r: PredictRequest, max_items: usize) -> Result<ValidClassify, CallError> {
    let inputs = match r.inputs {
        None => None,
        Some(PredictInputs::One(text)) => Some(Texts::One(text)),
        Some(PredictInputs::Strings(texts)) => Some(Texts::Many(texts)),
        Some(PredictInputs::Nested(_)) => {
            let message = "pairs are for a sequence-classification model; a task head takes strings";
            return Err(CallError::validation("inputs", message));
        }
    };
    let parameters = r.parameters.map(|p| (p.top_k.is_some(), p.function_to_apply.is_some()));
    let refused = [
        ("raw_scores", r.raw_scores.is_some()),
        ("parameters.top_k", parameters.is_some_and(|(top_k, _)| top_k)),
        ("parameters.function_to_apply", parameters.is_some_and(|(_, function)| function)),
    ];
    if let Some((field, _)) = refused.into_iter().find(|(_, sent)| *sent) {
        let message =
            "is for a sequence-classification model; a task head answers every class's softmax score";
        return Err(CallError::validation(field, message));
    }
    right_side(r.truncation_direction)?;
    service("inputs", (r.task, inputs, r.slo_ms, r.utility, r.truncate), max_items)
}

/// TEI's `truncation_direction`: Morph cuts the end (`"right"`), never the start.
pub(super) fn right_side(direction: Option<Text>) -> Result<(), CallError> {
    match direction {
        None => Ok(()),
        Some(Text(d)) if d.eq_ignore_ascii_case("right") => Ok(()),
        Some(_) => Err(CallError::validation(
            "truncation_direction",
            "only \"right\" is supported: Morph cuts an input's end, keeping its closing token",
        )),
    }
}

/// A classification call's fields (task, inputs from `field`, SLO, utility, truncate).
type ServiceFields = (Option<Text>, Option<Texts>, Option<Number>, Option<Number>, Option<Flag>);

fn service(
    field: &'static str,
    (task, input, slo_ms, utility, truncate): ServiceFields,
    max_items: usize,
) -> Result<ValidClassify, CallError> {
    let Some(Text(task)) = task else { return Err(CallError::validation("task", "is required")) };
    Ok(ValidClassify {
        task,
        texts: texts(field, input, max_items)?,
        field,
        slo_ms: SloMs::RANGE.given("slo_ms", slo_ms)?,
        utility: Utility::RANGE.read("utility", utility)?,
        truncate: Truncate::read(truncate),
    })
}

/// A generation call in `format`, on a decoder whose context holds `context` tokens; at most
/// `max_items` prompts.
pub fn generation(
    r: GenerationRequest,
    format: GenerationFormat,
    served: &[String],
    context: usize,
    max_items: usize,
) -> Result<ValidGeneration, CallError> {
    served_model(r.model, served)?;
    let prompts = match format {
        GenerationFormat::Completion => {
            let given = [
                r.messages.is_some(),
                r.top_logprobs.is_some(),
                r.tools.is_some(),
                r.tool_choice.is_some(),
                r.parallel_tool_calls.is_some(),
            ];
            refuse_other_format(&CHAT_ONLY, &given, format)?;
            texts("prompt", r.prompt, max_items)?.into_iter().map(Prompt::Text).collect()
        }
        GenerationFormat::Chat => {
            refuse_other_format(&COMPLETION_ONLY, &[r.prompt.is_some()], format)?;
            vec![Prompt::Chat(messages(r.messages)?)]
        }
    };
    let (max_tokens_field, max_tokens) = match (r.max_tokens, r.max_completion_tokens) {
        (Some(_), Some(_)) => {
            let message = "give max_tokens or max_completion_tokens (its newer name), not both";
            return Err(CallError::validation("max_completion_tokens", message));
        }
        (None, Some(n)) => ("max_completion_tokens", Some(n)),
        (given, None) => ("max_tokens", given),
    };
    let max_tokens = MaxTokens::RANGE.up_to(context as f64).given(max_tokens_field, max_tokens)?;
    let (max_tokens_given, max_tokens) =
        (max_tokens.is_some(), max_tokens.map_or(context, |n| n as usize) as u32);
    // Without a seed each call draws its own, so repeated calls sample afresh.
    let seed = Seed::RANGE.given("seed", r.seed)?.map_or_else(rand::random, |s| s as u64);
    let sampling = SamplingParams {
        temperature: Temperature::RANGE.read("temperature", r.temperature)? as f32,
        top_p: TopP::RANGE.read("top_p", r.top_p)? as f32,
        top_k: TopK::RANGE.read("top_k", r.top_k)? as u32,
        min_p: MinP::RANGE.read("min_p", r.min_p)? as f32,
        presence_penalty: Penalty::RANGE.read("presence_penalty", r.presence_penalty)? as f32,
        frequency_penalty: Penalty::RANGE.read("frequency_penalty", r.frequency_penalty)? as f32,
        seed,
    };
    let stream = Stream::read(r.stream);
    let include_usage = stream_usage(r.stream_options, stream)?;
    let output = output(
        OutputFields {
            format: r.response_format.map(|v| (v, "response_format")),
            tools: r.tools,
            tool_choice: r.tool_choice,
            parallel_tool_calls: r.parallel_tool_calls.map(|Flag(on)| on),
        },
        ToolShape::Nested,
    )?;
    let logprobs = logprobs(format, r.logprobs, r.top_logprobs)?;
    if logprobs.is_some() && output.offers_tools() {
        return Err(CallError::validation("logprobs", "is not given with tools: leave one out"));
    }
    log_user(format.route(), r.user);
    Ok(ValidGeneration {
        prompts,
        n: Choices::RANGE.read("n", r.n)? as u32,
        max_tokens,
        max_tokens_given,
        sampling,
        stop: stops(r.stop)?,
        logprobs,
        stream,
        include_usage,
        output,
    })
}

/// A generation call's body in `format`; a field no generation route takes is refused with the
/// fields this route takes (not the other route's).
pub fn generation_request(body: &[u8], format: GenerationFormat) -> Result<GenerationRequest, CallError> {
    parse(body).map_err(|e| match e {
        CallError::Validation { field, message } => {
            let other: &[&str] = match format {
                GenerationFormat::Chat => &COMPLETION_ONLY,
                GenerationFormat::Completion => &CHAT_ONLY,
            };
            let message = other
                .iter()
                .fold(message, |m, f| m.replace(&format!("`{f}`, "), "").replace(&format!(", `{f}`"), ""));
            CallError::Validation { field, message }
        }
        e => e,
    })
}

/// The first of the other generation route's `fields` that was `given` is named, with the route
/// that takes it.
fn refuse_other_format(fields: &[&str], given: &[bool], format: GenerationFormat) -> Result<(), CallError> {
    let other = match format {
        GenerationFormat::Chat => GenerationFormat::Completion,
        GenerationFormat::Completion => GenerationFormat::Chat,
    };
    match fields.iter().zip(given).find(|(_, given)| **given) {
        Some((field, _)) => {
            Err(CallError::validation(*field, format!("is a field of {}, not of this route", other.route())))
        }
        None => Ok(()),
    }
}

/// `stop`: a string or up to [`MAX_STOPS`] strings, none empty.
fn stops(value: Option<Texts>) -> Result<Vec<String>, CallError> {
    match value {
        None => Ok(Vec::new()),
        value => texts("stop", value, MAX_STOPS),
    }
}

/// `stream_options` (only with `stream`): whether the last chunk carries the usage.
fn stream_usage(options: Option<StreamOptions>, stream: bool) -> Result<bool, CallError> {
    match options {
        None => Ok(false),
        Some(_) if !stream => Err(CallError::validation("stream_options", "is only for \"stream\": true")),
        Some(StreamOptions { include_usage }) => Ok(IncludeUsage::read(include_usage)),
    }
}

/// Whether each token's log-probability is asked for, and with how many alternatives: chat's
/// `logprobs` is true or false with `top_logprobs` beside it; completions' `logprobs` is the
/// number of alternatives itself.
fn logprobs(
    format: GenerationFormat,
    logprobs: Option<serde_json::Value>,
    top: Option<Number>,
) -> Result<Option<u8>, CallError> {
    let logprobs = logprobs.filter(|v| !v.is_null());
    match format {
        GenerationFormat::Chat => {
            let asked = match logprobs {
                None => false,
                Some(serde_json::Value::Bool(asked)) => asked,
                Some(_) => return Err(CallError::validation("logprobs", "must be true or false")),
            };
            let top = TopLogprobs::RANGE.read("top_logprobs", top)? as u8;
            match (asked, top) {
                (false, 0) => Ok(None),
                (false, _) => Err(CallError::validation("top_logprobs", "needs \"logprobs\": true")),
                (true, top) => Ok(Some(top)),
            }
        }
        GenerationFormat::Completion => {
            let number = match logprobs {
                None => return Ok(None),
                Some(serde_json::Value::Number(n)) => n.as_f64().map(Number),
                Some(_) => None,
            };
            let Some(number) = number else {
                return Err(CallError::validation("logprobs", "must be a number of alternatives, 0 to 5"));
            };
            Ok(CompletionLogprobs::RANGE.given("logprobs", Some(number))?.map(|n| n as u8))
        }
    }
}

/// `user`: the caller's end user, logged with the call (it changes nothing else).
pub(super) fn log_user(route: &str, user: Option<Text>) {
    if let Some(Text(user)) = user {
        tracing::debug!(route, user, "call");
    }
}

/// `model`, when given, must be the one served.
pub(super) fn served_model(model: Option<Text>, served: &[String]) -> Result<(), CallError> {
    match model {
        Some(Text(asked)) if !served.contains(&asked) => Err(CallError::unknown_model(asked, served)),
        _ => Ok(()),
    }
}

/// A string or a non-empty array of strings, none empty, at most `max_items` of them.
pub(super) fn texts(field: &str, value: Option<Texts>, max_items: usize) -> Result<Vec<String>, CallError> {
    match value {
        None => Err(CallError::validation(field, "is required")),
        Some(Texts::One(text)) if text.is_empty() => Err(CallError::validation(field, "must not be empty")),
        Some(Texts::One(text)) => Ok(vec![text]),
        Some(Texts::Many(items)) if items.is_empty() => {
            Err(CallError::validation(field, "must not be an empty array"))
        }
        Some(Texts::Many(items)) if items.len() > max_items => Err(CallError::validation(
            field,
            format!("has {} items; at most {max_items} per call", items.len()),
        )),
        Some(Texts::Many(items)) => match items.iter().position(String::is_empty) {
            Some(i) => Err(CallError::validation(format!("{field}[{i}]"), "must not be empty")),
            None => Ok(items),
        },
    }
}

/// `input`/`inputs` of an embedding call: texts as [`texts`], or token ids, each array non-empty.
fn inputs(field: &str, value: Option<Inputs>, max_items: usize) -> Result<EmbedInputs, CallError> {
    let (ids, one) = match value {
        None => return Err(CallError::validation(field, "is required")),
        Some(Inputs::Texts(t)) => return texts(field, Some(t), max_items).map(EmbedInputs::Texts),
        Some(Inputs::Tokens { ids, one }) => (ids, one),
    };
    if ids.len() > max_items {
        return Err(CallError::validation(
            field,
            format!("has {} items; at most {max_items} per call", ids.len()),
        ));
    }
    match ids.iter().position(Vec::is_empty) {
        Some(i) if !one => Err(CallError::validation(format!("{field}[{i}]"), "must not be an empty array")),
        _ => Ok(EmbedInputs::Tokens(ids)),
    }
}

/// `messages`: a non-empty array of `{role, content}`, content a string or text parts.
fn messages(value: Option<Messages>) -> Result<Vec<Message>, CallError> {
    let list = match value {
        None => return Err(CallError::validation("messages", "is required")),
        Some(Messages(list)) if list.is_empty() => {
            return Err(CallError::validation("messages", "must not be empty"));
        }
        Some(Messages(list)) => list,
    };
    list.into_iter()
        .enumerate()
        .map(|(i, ChatMessage { role, content, tool_calls, tool_call_id })| {
            let role = match role {
                Some(Text(role)) => chat_role(format!("messages[{i}].role"), &role)?,
                None => return Err(CallError::validation(format!("messages[{i}].role"), "must be a string")),
            };
            let tool_calls = match tool_calls {
                Some(calls) if role == "assistant" => past_calls(i, calls)?,
                Some(_) => {
                    return Err(CallError::validation(
                        format!("messages[{i}].tool_calls"),
                        "is for an assistant message",
                    ));
                }
                None => Vec::new(),
            };
            let tool_call_id = match (tool_call_id, role.as_str()) {
                (Some(Text(id)), "tool") => Some(id),
                (None, "tool") => {
                    return Err(CallError::validation(
                        format!("messages[{i}].tool_call_id"),
                        "is required for a tool message",
                    ));
                }
                (Some(_), _) => {
                    return Err(CallError::validation(
                        format!("messages[{i}].tool_call_id"),
                        "is for a tool message",
                    ));
                }
                (None, _) => None,
            };
            // An assistant turn that only calls tools has no content.
            let content = match content {
                None if !tool_calls.is_empty() => String::new(),
                content => content_text(i, content)?,
            };
            Ok(Message { role, content, tool_calls, tool_call_id })
        })
        .collect()
}

/// An assistant turn's earlier `tool_calls` (as a chat answer gave them) in the shape chat
/// templates read: each `{"type": "function", "function": {"name", "arguments"}}`, the arguments
/// an object.
fn past_calls(i: usize, calls: serde_json::Value) -> Result<Vec<serde_json::Value>, CallError> {
    let serde_json::Value::Array(calls) = calls else {
        return Err(CallError::validation(format!("messages[{i}].tool_calls"), "must be an array"));
    };
    calls
        .iter()
        .enumerate()
        .map(|(j, call)| {
            let field = |what: &str| format!("messages[{i}].tool_calls[{j}].function.{what}");
            let name = call.pointer("/function/name").and_then(|n| n.as_str());
            let name = name.ok_or_else(|| CallError::validation(field("name"), "must be a string"))?;
            let arguments = match call.pointer("/function/arguments") {
                Some(serde_json::Value::String(text)) => serde_json::from_str::<serde_json::Value>(text)
                    .map_err(|e| CallError::validation(field("arguments"), format!("must be JSON: {e}")))?,
                _ => return Err(CallError::validation(field("arguments"), "must be a string of JSON")),
            };
            let id = call.get("id").cloned().unwrap_or_default();
            Ok(serde_json::json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}))
        })
        .collect()
}

/// A chat message's role, one of [`ROLES`] (`developer` read as `system`), given at `field`.
pub(super) fn chat_role(field: String, role: &str) -> Result<String, CallError> {
    match role {
        "developer" => Ok("system".to_string()),
        role if ROLES.contains(&role) => Ok(role.to_string()),
        _ => Err(CallError::validation(field, format!("must be one of {}", ROLES.join(", ")))),
    }
}

/// Message `i`'s content: a string, or the texts of its parts (only parts of type text) joined
/// by newlines.
fn content_text(i: usize, content: Option<Content>) -> Result<String, CallError> {
    let parts = match content {
        None => return Err(CallError::validation(format!("messages[{i}].content"), "must be a string")),
        Some(Content::Text(text)) => return Ok(text),
        Some(Content::Parts(parts)) => parts,
    };
    let texts = parts.iter().enumerate().map(|(j, part)| {
        let field = || format!("messages[{i}].content[{j}]");
        match (part.get("type").and_then(|t| t.as_str()), part.get("text").and_then(|t| t.as_str())) {
            (Some("text"), Some(text)) => Ok(text),
            (Some("text"), None) => {
                Err(CallError::validation(field(), "a text part needs \"text\": a string"))
            }
            (Some(kind), _) => Err(CallError::validation(
                field(),
                format!("parts of type {kind} are not supported: text only"),
            )),
            (None, _) => Err(CallError::validation(field(), "must be {\"type\": \"text\", \"text\": ...}")),
        }
    });
    Ok(texts.collect::<Result<Vec<_>, _>>()?.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::super::fields::parse;
    use super::*;

    fn embed_call(body: &str, max_items: usize) -> Result<EmbeddingsCall, String> {
        let r: EmbeddingsRequest = parse(body.as_bytes()).map_err(|e| e.to_string())?;
        embeddings(r, max_items, &["m".to_string()], 384).map_err(|e| e.to_string())
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

    fn generate(body: &str, format: GenerationFormat) -> Result<ValidGeneration, String> {
        let r = parse(body.as_bytes()).map_err(|e: CallError| e.to_string())?;
        generation(r, format, &["m".to_string()], 2048, 4).map_err(|e| e.to_string())
    }

    #[test]
    fn generation_settings_are_bounded_and_messages_need_both_parts() {
        let gen_error = |body: &str, format| generate(body, format).unwrap_err();
        let chat = GenerationFormat::Chat;
        assert_eq!(gen_error(r#"{"messages": []}"#, chat), "messages: must not be empty");
        assert_eq!(
            gen_error(r#"{"messages": [{"role": "user"}]}"#, chat),
            "messages[0].content: must be a string"
        );
        assert_eq!(
            gen_error(r#"{"messages": [{"role": "critic", "content": "x"}]}"#, chat),
            "messages[0].role: must be one of system, developer, user, assistant, tool"
        );
        assert_eq!(
            gen_error(r#"{"messages": [{"role": "tool", "content": "x"}]}"#, chat),
            "messages[0].tool_call_id: is required for a tool message"
        );
        assert_eq!(
            gen_error(r#"{"messages": [{"role": "user", "content": "x", "tool_calls": []}]}"#, chat),
            "messages[0].tool_calls: is for an assistant message"
        );
        assert_eq!(
            gen_error(
                r#"{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}"#,
                chat
            ),
            "messages[0].content[0]: parts of type image_url are not supported: text only"
        );
        assert!(
            gen_error(r#"{"messages": [{"role": "user", "content": "x", "name": "a"}]}"#, chat)
                .starts_with("messages[0].name: is not supported")
        );
        // Each field the OpenAPI document leaves out of a route's schema is refused there.
        for field in COMPLETION_ONLY {
            let body = format!(r#"{{"messages": [{{"role": "user", "content": "x"}}], "{field}": "x"}}"#);
            assert!(gen_error(&body, chat).starts_with(&format!("{field}: is a field of /v1/completions")));
        }
        for field in CHAT_ONLY {
            let value = match field {
                "messages" => r#"[{"role": "user", "content": "x"}]"#,
                "parallel_tool_calls" => "true",
                _ => "2",
            };
            let body = format!(r#"{{"prompt": "x", "{field}": {value}}}"#);
            let error = gen_error(&body, GenerationFormat::Completion);
            assert!(error.starts_with(&format!("{field}: is a field of /v1/chat/completions")), "{error}");
        }
        let completion = GenerationFormat::Completion;
        for (body, error) in [
            (r#"{"prompt": "hi", "max_tokens": 0}"#, "max_tokens: must be between 1 and 2048"),
            (r#"{"prompt": "hi", "max_tokens": 1.5}"#, "max_tokens: must be a whole number"),
            (
                r#"{"prompt": "hi", "max_tokens": 4, "max_completion_tokens": 4}"#,
                "max_completion_tokens: give max_tokens",
            ),
            (r#"{"prompt": "hi", "temperature": -1}"#, "temperature: must be between 0 and 2"),
            (r#"{"prompt": ["a", "b", "c", "d", "e"]}"#, "prompt: has 5 items; at most 4 per call"),
            (
                r#"{"prompt": "hi", "stop": ["a", "b", "c", "d", "e"]}"#,
                "stop: has 5 items; at most 4 per call",
            ),
            (r#"{"prompt": "hi", "n": 17}"#, "n: must be between 1 and 16"),
            (r#"{"prompt": "hi", "stream_options": {"include_usage": true}}"#, "stream_options: is only for"),
            (r#"{"prompt": "hi", "response_format": {"type": "yaml"}}"#, "response_format: must be"),
            (r#"{"prompt": "hi", "logprobs": 6}"#, "logprobs: must be between 0 and 5"),
            (r#"{"prompt": "hi", "logprobs": true}"#, "logprobs: must be a number of alternatives"),
            (r#"{"prompt": "hi", "top_logprobs": 2}"#, "top_logprobs: is a field of /v1/chat/completions"),
            (r#"{"prompt": "hi", "echo": true}"#, "echo: is not supported by this server"),
        ] {
            let got = gen_error(body, completion);
            assert!(got.starts_with(error), "{body}: {got}");
        }
        let ok = generate(
            r#"{"prompt": "hi", "seed": 7, "logprobs": 2, "response_format": {"type": "text"}}"#,
            completion,
        )
        .unwrap();
        assert_eq!(
            (ok.max_tokens, ok.max_tokens_given, ok.sampling.seed, ok.stream),
            (2048, false, 7, false)
        );
        assert_eq!(ok.logprobs, Some(2));
        let chat_logprobs = |fields: &str| {
            let body = format!(r#"{{"messages": [{{"role": "user", "content": "hi"}}], {fields}}}"#);
            generate(&body, chat).map(|g| g.logprobs)
        };
        assert_eq!(chat_logprobs(r#""logprobs": true, "top_logprobs": 3"#), Ok(Some(3)));
        assert_eq!(chat_logprobs(r#""logprobs": false"#), Ok(None));
        assert!(chat_logprobs(r#""top_logprobs": 3"#).unwrap_err().starts_with("top_logprobs: needs"));
    }

    #[test]
    fn an_unknown_field_is_refused_with_this_route_s_fields_only() {
        let chat =
            generation_request(br#"{"messages": [], "best_of": 2}"#, GenerationFormat::Chat).unwrap_err();
        let text = chat.to_string();
        assert!(text.starts_with("best_of: is not supported") && text.contains("`messages`"), "{text}");
        assert!(!text.contains("`prompt`"), "{text}");
        let completion =
            generation_request(br#"{"prompt": "a", "best_of": 2}"#, GenerationFormat::Completion);
        let text = completion.unwrap_err().to_string();
        assert!(
            text.contains("`prompt`") && !text.contains("`messages`") && !text.contains("`tools`"),
            "{text}"
        );
    }

    #[test]
    fn openai_sampling_fields_reach_the_sampler_and_choices_come_per_prompt() {
        let call = generate(
            r#"{"prompt": ["a", "b"], "n": 2, "max_completion_tokens": 9, "top_k": 5, "min_p": 0.1,
                "presence_penalty": 0.5, "frequency_penalty": -0.5, "seed": 10, "stop": "\n",
                "stream": true, "stream_options": {"include_usage": true}}"#,
            GenerationFormat::Completion,
        )
        .unwrap();
        assert_eq!((call.max_tokens, call.max_tokens_given, call.include_usage), (9, true, true));
        let s = call.sampling;
        assert_eq!((s.top_k, s.min_p, s.presence_penalty, s.frequency_penalty), (5, 0.1, 0.5, -0.5));
        assert_eq!(call.stop, vec!["\n".to_string()]);
        let choices: Vec<(usize, u64)> = call.choices().map(|(p, d)| (p, d.sampling.seed)).collect();
        assert_eq!(choices, [(0, 10), (0, 11), (1, 10), (1, 11)]);
    }
}
