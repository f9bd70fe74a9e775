//! A `/v1/responses` call checked into the generation it asks for: its input as chat messages
//! (`instructions` first, as a system message; earlier `function_call` items as an assistant's
//! calls, `function_call_output` items as tool results), its sampling, its token limit, and what
//! its answer must be (`text.format`, `tools`).

use morph_decoder::{LogitBias, Message, SamplingParams};
use serde_json::Value;

use super::requests::ResponsesRequest;
use super::validate::chat_role;
use super::validate_output::{OutputFields, ToolShape, output};
use crate::api::AppState;
use crate::api::bounds::{Bounded, Switch};
use crate::api::checks::{log_user, served_model};
use crate::api::field_types::{MaxOutputTokens, Stream, Temperature, TopP};
use crate::api::fields::{Flag, Text};
use crate::api::opening::Check;
use crate::error::CallError;
use crate::infer::{Prompt, ValidGeneration};

impl Check for ResponsesRequest {
    type Valid = ValidGeneration;

    fn check(self, state: &AppState) -> Result<ValidGeneration, CallError> {
        responses(self, &state.model.names, state.generator()?.context())
    }
}

/// The route, for the log line of `user`.
const ROUTE: &str = "/v1/responses";

/// A `/v1/responses` call on a decoder whose context holds `context` tokens.
fn responses(r: ResponsesRequest, served: &[String], context: usize) -> Result<ValidGeneration, CallError> {
    served_model(r.model, served)?;
    if r.store.is_some_and(|Flag(on)| on) {
        return Err(CallError::validation(
            "store",
            "nothing is stored by this server: leave it out or false",
        ));
    }
    let mut messages = Vec::new();
    if let Some(Text(instructions)) = r.instructions {
        messages.push(Message::new("system", &instructions));
    }
    messages.extend(input(r.input)?);
    log_user(ROUTE, r.user);
    let output = output(
        OutputFields {
            format: text_format(r.text)?.map(|f| (f, "text.format")),
            tools: r.tools,
            tool_choice: r.tool_choice,
            parallel_tool_calls: r.parallel_tool_calls.map(|Flag(on)| on),
        },
        ToolShape::Flat,
    )?;
    let max_tokens =
        MaxOutputTokens::RANGE.up_to(context as f64).given("max_output_tokens", r.max_output_tokens)?;
    Ok(ValidGeneration {
        echo: false,
        prompts: vec![Prompt::Chat(messages)],
        n: 1,
        max_tokens: max_tokens.map_or(context, |n| n as usize) as u32,
        max_tokens_given: max_tokens.is_some(),
        // The Responses API has no top_k, min_p or penalties: they stay off.
        sampling: SamplingParams {
            temperature: Temperature::RANGE.read("temperature", r.temperature)? as f32,
            top_p: TopP::RANGE.read("top_p", r.top_p)? as f32,
            seed: rand::random(),
            ..SamplingParams::default()
        },
        stop: Vec::new(),
        // Nor logit_bias.
        logit_bias: LogitBias::new(),
        logprobs: None,
        stream: Stream::read(r.stream),
        include_usage: false,
        output,
    })
}

/// `text`: only its `format` is honoured.
fn text_format(text: Option<Value>) -> Result<Option<Value>, CallError> {
    let Some(text) = text.filter(|t| !t.is_null()) else { return Ok(None) };
    let Some(object) = text.as_object() else {
        return Err(CallError::validation("text", "must be an object {\"format\": ...}"));
    };
    if let Some(other) = object.keys().find(|k| k.as_str() != "format") {
        return Err(CallError::validation(format!("text.{other}"), "is not supported by this server"));
    }
    Ok(object.get("format").cloned())
}

/// `input`: a string (one user message) or a non-empty array of messages.
fn input(value: Option<Value>) -> Result<Vec<Message>, CallError> {
    match value {
        None | Some(Value::Null) => Err(CallError::validation("input", "is required")),
        Some(Value::String(text)) if text.is_empty() => {
            Err(CallError::validation("input", "must not be empty"))
        }
        Some(Value::String(text)) => Ok(vec![Message::new("user", &text)]),
        Some(Value::Array(items)) if items.is_empty() => {
            Err(CallError::validation("input", "must not be an empty array"))
        }
        Some(Value::Array(items)) => {
            let mut messages: Vec<Message> = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                match item.get("type").and_then(Value::as_str) {
                    Some("function_call") => {
                        let call = past_call(i, item)?;
                        // Calls made together are one assistant turn.
                        match messages.last_mut() {
                            Some(last) if last.role == "assistant" && !last.tool_calls.is_empty() => {
                                last.tool_calls.push(call);
                            }
                            _ => messages
                                .push(Message { tool_calls: vec![call], ..Message::new("assistant", "") }),
                        }
                    }
                    Some("function_call_output") => messages.push(call_output(i, item)?),
                    _ => messages.push(message(i, item)?),
                }
            }
            Ok(messages)
        }
        Some(_) => Err(CallError::validation("input", "must be a string or an array of messages")),
    }
}

/// Input item `i`: `{role, content}`, with `type: "message"` optional.
fn message(i: usize, item: &Value) -> Result<Message, CallError> {
    let field = |name: &str| format!("input[{i}]{name}");
    let Some(object) = item.as_object() else {
        return Err(CallError::validation(field(""), "must be a message {role, content}"));
    };
    if let Some(unknown) = object.keys().find(|k| !["type", "role", "content"].contains(&k.as_str())) {
        return Err(CallError::validation(field(&format!(".{unknown}")), "is not supported by this server"));
    }
    match object.get("type").map(|t| t.as_str()) {
        None | Some(Some("message")) => {}
        Some(_) => {
            let message = "only messages, function_call and function_call_output items are supported";
            return Err(CallError::validation(field(".type"), message));
        }
    }
    let role = chat_role(field(".role"), object.get("role").and_then(Value::as_str).unwrap_or_default())?;
    Ok(Message::new(&role, &content(&field(".content"), object.get("content"))?))
}

/// Input item `i`, an earlier `function_call` (`call_id`, `name`, `arguments` a string of
/// JSON), in the shape chat templates read.
fn past_call(i: usize, item: &Value) -> Result<Value, CallError> {
    let text = |key: &str| {
        item.get(key)
            .and_then(Value::as_str)
            .ok_or_else(|| CallError::validation(format!("input[{i}].{key}"), "must be a string"))
    };
    let arguments: Value = serde_json::from_str(text("arguments")?)
        .map_err(|e| CallError::validation(format!("input[{i}].arguments"), format!("must be JSON: {e}")))?;
    Ok(
        serde_json::json!({"id": text("call_id")?, "type": "function", "function": {"name": text("name")?, "arguments": arguments}}),
    )
}

/// Input item `i`, a `function_call_output` (`call_id`, `output`): a tool's result.
fn call_output(i: usize, item: &Value) -> Result<Message, CallError> {
    let text = |key: &str| {
        item.get(key)
            .and_then(Value::as_str)
            .ok_or_else(|| CallError::validation(format!("input[{i}].{key}"), "must be a string"))
    };
    Ok(Message { tool_call_id: Some(text("call_id")?.to_string()), ..Message::new("tool", text("output")?) })
}

/// A message's content: a string, or the texts of its `input_text`/`output_text` parts joined by
/// newlines.
fn content(field: &str, value: Option<&Value>) -> Result<String, CallError> {
    let parts = match value {
        Some(Value::String(text)) => return Ok(text.clone()),
        Some(Value::Array(parts)) => parts,
        _ => return Err(CallError::validation(field, "must be a string or an array of text parts")),
    };
    let texts = parts.iter().enumerate().map(|(j, part)| {
        match (part.get("type").and_then(Value::as_str), part.get("text").and_then(Value::as_str)) {
            (Some("input_text" | "output_text"), Some(text)) => Ok(text),
            (Some(kind), _) => Err(CallError::validation(
                format!("{field}[{j}]"),
                format!("parts of type {kind} are not supported: input_text and output_text only"),
            )),
            (None, _) => Err(CallError::validation(
                format!("{field}[{j}]"),
                "must be {\"type\": \"input_text\", \"text\": ...}",
            )),
        }
    });
    Ok(texts.collect::<Result<Vec<_>, _>>()?.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::fields::parse;

    fn call(body: &str) -> Result<ValidGeneration, String> {
        let r: ResponsesRequest = parse(body.as_bytes()).map_err(|e| e.to_string())?;
        responses(r, &["m".to_string()], 2048).map_err(|e| e.to_string())
    }

    #[test]
    fn input_and_instructions_become_the_chat_and_the_rest_is_refused_by_name() {
        let ok = call(r#"{"input": "Hi", "instructions": "Be brief.", "max_output_tokens": 9}"#).unwrap();
        let messages = match &ok.prompts[0] {
            Prompt::Chat(m) => m.iter().map(|m| (m.role.as_str(), m.content.as_str())).collect::<Vec<_>>(),
            Prompt::Text(_) | Prompt::Tokens(_) => Vec::new(),
        };
        assert_eq!(messages, [("system", "Be brief."), ("user", "Hi")]);
        assert_eq!((ok.max_tokens, ok.max_tokens_given, ok.stream), (9, true, false));
        assert!(call(r#"{"input": "Hi", "stream": true}"#).unwrap().stream);
        let parts = r#"{"input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"}]}]}"#;
        assert!(call(parts).is_ok());
        for (body, error) in [
            (r#"{}"#, "input: is required"),
            (r#"{"input": "Hi", "tools": [{"type": "web_search"}]}"#, "tools[0].type: must be \"function\""),
            (r#"{"input": "Hi", "text": {"verbosity": "low"}}"#, "text.verbosity: is not supported"),
            (r#"{"input": "Hi", "text": {"format": {"type": "yaml"}}}"#, "text.format: must be"),
            (
                r#"{"input": [{"type": "function_call_output", "output": "x"}]}"#,
                "input[0].call_id: must be a string",
            ),
            (
                r#"{"input": [{"type": "reasoning", "role": "user", "content": "x"}]}"#,
                "input[0].type: only messages",
            ),
            (
                r#"{"input": [{"role": "user", "content": [{"type": "input_image"}]}]}"#,
                "input[0].content[0]: parts of type input_image",
            ),
            (r#"{"input": "Hi", "max_output_tokens": 0}"#, "max_output_tokens: must be between 1 and 2048"),
        ] {
            let got = call(body).unwrap_err();
            assert!(got.starts_with(error), "{body}: {got}");
        }
    }
}
