//! Chat and completions bodies checked into a generation: what is missing, empty, too many or out
//! of bounds is refused with a message that names the field.

use morph_decoder::{LogitBias, Message, SamplingParams};

use super::requests::{CHAT_ONLY, COMPLETION_ONLY, GenerationRequest, MAX_STOPS, StreamOptions};
use super::validate_output::{OutputFields, ToolShape, output};
use crate::api::bounds::{Bounded, Range, Switch};
use crate::api::checks::{inputs, log_user, served_model, texts};
use crate::api::field_types::*;
use crate::api::fields::{ChatMessage, Content, Flag, Messages, Number, ROLES, Text, Texts, parse};
use crate::error::CallError;
use crate::infer::{EmbedInputs, GenerationFormat, Prompt, ValidGeneration};

/// A generation call in `format`, on a decoder whose context holds `context` tokens; at most
/// `max_items` prompts.
pub(crate) fn generation(
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
            match inputs("prompt", r.prompt, max_items)? {
                EmbedInputs::Tokens(ids) => ids.into_iter().map(Prompt::Tokens).collect(),
                EmbedInputs::Texts(texts) => texts.into_iter().map(Prompt::Text).collect(),
                EmbedInputs::Sequences(_) => unreachable!("prompts are never read as pairs"),
            }
        }
        GenerationFormat::Chat => {
            refuse_other_format(&COMPLETION_ONLY, &[r.prompt.is_some(), r.echo.is_some()], format)?;
            vec![Prompt::Chat(messages(r.messages)?)]
        }
    };
    let echo = r.echo.is_some_and(|Flag(on)| on);
    let (max_tokens_field, max_tokens) = match (r.max_tokens, r.max_completion_tokens) {
        (Some(_), Some(_)) => {
            let message = "give max_tokens or max_completion_tokens (its newer name), not both";
            return Err(CallError::validation("max_completion_tokens", message));
        }
        (None, Some(n)) => ("max_completion_tokens", Some(n)),
        (given, None) => ("max_tokens", given),
    };
    // An echoed prompt may be only scored: no tokens after it; else an answer has one at least.
    let least = if echo { MaxTokens::RANGE.min } else { MaxOutputTokens::RANGE.min };
    let range = Range { min: least, ..MaxTokens::RANGE };
    let max_tokens = range.up_to(context as f64).given(max_tokens_field, max_tokens)?;
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
        logit_bias: logit_bias(r.logit_bias)?,
        logprobs,
        echo,
        stream,
        include_usage,
        output,
    })
}

/// A generation call's body in `format`; a field no generation route takes is refused with the
/// fields this route takes (not the other route's).
pub(crate) fn generation_request(
    body: &[u8],
    format: GenerationFormat,
) -> Result<GenerationRequest, CallError> {
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

/// Most tokens one `logit_bias` names (OpenAI's limit).
const MAX_BIASED: usize = 300;
/// A token's bias: -100 bans it, 100 all but forces it (OpenAI's range).
const BIAS: std::ops::RangeInclusive<f64> = -100.0..=100.0;

/// `logit_bias`: an object of token ids (as strings) to biases from -100 to 100. Whether each id
/// is in the model's vocabulary is the generator's to check.
fn logit_bias(value: Option<serde_json::Value>) -> Result<LogitBias, CallError> {
    let field = "logit_bias";
    let entries = match value {
        None | Some(serde_json::Value::Null) => return Ok(LogitBias::new()),
        Some(serde_json::Value::Object(entries)) => entries,
        Some(_) => return Err(CallError::validation(field, "must be an object of token ids to biases")),
    };
    if entries.len() > MAX_BIASED {
        return Err(CallError::validation(field, format!("names more than {MAX_BIASED} tokens")));
    }
    entries
        .into_iter()
        .map(|(id, bias)| {
            let at = format!("{field}.{id}");
            let token = id.parse::<u32>().map_err(|_| CallError::validation(&at, "must be a token id"))?;
            match bias.as_f64() {
                Some(bias) if BIAS.contains(&bias) => Ok((token, bias as f32)),
                _ => Err(CallError::validation(at, "must be a number from -100 to 100")),
            }
        })
        .collect()
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
    use super::*;
    use crate::api::fields::parse;

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
            let value = if field == "echo" { "true" } else { r#""x""# };
            let body = format!(r#"{{"messages": [{{"role": "user", "content": "x"}}], "{field}": {value}}}"#);
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
            (r#"{"prompt": "hi", "echo": 1}"#, "echo: must be true or false"),
            (r#"{"prompt": [1, "a"]}"#, "prompt[1]: must be a token id"),
            (r#"{"prompt": [[1], []]}"#, "prompt[1]: must not be an empty array"),
            (r#"{"prompt": [[1], [2], [3], [4], [5]]}"#, "prompt: has 5 items; at most 4 per call"),
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
    fn a_prompt_may_be_token_ids_and_an_echoed_one_may_be_only_scored() {
        let call = |body: &str| generate(body, GenerationFormat::Completion);
        let ids = call(r#"{"prompt": [[1, 2], [3]], "echo": true, "logprobs": 1, "max_tokens": 0}"#).unwrap();
        assert_eq!(ids.prompts, [Prompt::Tokens(vec![1, 2]), Prompt::Tokens(vec![3])]);
        assert_eq!((ids.echo, ids.max_tokens, ids.max_tokens_given), (true, 0, true));
        assert!(ids.choices().all(|(_, d)| d.score_prompt), "echo with logprobs scores the prompt");
        let one = call(r#"{"prompt": [5, 6, 7]}"#).unwrap();
        assert_eq!((one.prompts, one.echo), (vec![Prompt::Tokens(vec![5, 6, 7])], false));
        let echoed = call(r#"{"prompt": "hi", "echo": true}"#).unwrap();
        assert!(echoed.echo && echoed.choices().all(|(_, d)| !d.score_prompt), "no logprobs: text only");
        let unscored = call(r#"{"prompt": "hi", "max_tokens": 0}"#).unwrap_err();
        assert!(unscored.to_string().starts_with("max_tokens: must be between 1 and"), "{unscored}");
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
