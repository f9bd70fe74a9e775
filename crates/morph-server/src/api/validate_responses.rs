//! A `/v1/responses` call checked into the generation it asks for: its input as chat messages
//! (`instructions` first, as a system message), its sampling and its token limit.

use morph_decoder::{Message, SamplingParams};
use serde_json::Value;

use super::bounds::{Bounded, Switch};
use super::fields::{Flag, Text};
use super::requests::{MaxTokens, ResponsesRequest, Stream, Temperature, TopP};
use super::validate::{chat_role, log_user, served_model};
use crate::error::CallError;
use crate::infer::{Prompt, ValidGeneration};

/// The route, for the log line of `user`.
const ROUTE: &str = "/v1/responses";

/// A `/v1/responses` call on a decoder whose context holds `context` tokens.
pub fn responses(
    r: ResponsesRequest,
    served: &[String],
    context: usize,
) -> Result<ValidGeneration, CallError> {
    served_model(r.model, served)?;
    if r.store.is_some_and(|Flag(on)| on) {
        return Err(CallError::validation(
            "store",
            "nothing is stored by this server: leave it out or false",
        ));
    }
    let mut messages = Vec::new();
    if let Some(Text(instructions)) = r.instructions {
        messages.push(Message { role: "system".into(), content: instructions });
    }
    messages.extend(input(r.input)?);
    log_user(ROUTE, r.user);
    let max_tokens = MaxTokens::RANGE.up_to(context as f64).read("max_output_tokens", r.max_output_tokens)?;
    Ok(ValidGeneration {
        prompts: vec![Prompt::Chat(messages)],
        n: 1,
        max_tokens: max_tokens as u32,
        max_tokens_given: r.max_output_tokens.is_some(),
        // The Responses API has no top_k, min_p or penalties: they stay off.
        sampling: SamplingParams {
            temperature: Temperature::RANGE.read("temperature", r.temperature)? as f32,
            top_p: TopP::RANGE.read("top_p", r.top_p)? as f32,
            seed: rand::random(),
            ..SamplingParams::default()
        },
        stop: Vec::new(),
        logprobs: None,
        stream: Stream::read(r.stream),
        include_usage: false,
    })
}

/// `input`: a string (one user message) or a non-empty array of messages.
fn input(value: Option<Value>) -> Result<Vec<Message>, CallError> {
    match value {
        None | Some(Value::Null) => Err(CallError::validation("input", "is required")),
        Some(Value::String(text)) if text.is_empty() => {
            Err(CallError::validation("input", "must not be empty"))
        }
        Some(Value::String(text)) => Ok(vec![Message { role: "user".into(), content: text }]),
        Some(Value::Array(items)) if items.is_empty() => {
            Err(CallError::validation("input", "must not be an empty array"))
        }
        Some(Value::Array(items)) => items.iter().enumerate().map(|(i, item)| message(i, item)).collect(),
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
            let message = "only messages are supported (no function calls, reasoning or other items)";
            return Err(CallError::validation(field(".type"), message));
        }
    }
    let role = chat_role(field(".role"), object.get("role").and_then(Value::as_str).unwrap_or_default())?;
    Ok(Message { role, content: content(&field(".content"), object.get("content"))? })
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
    use super::super::fields::parse;
    use super::*;

    fn call(body: &str) -> Result<ValidGeneration, String> {
        let r: ResponsesRequest = parse(body.as_bytes()).map_err(|e| e.to_string())?;
        responses(r, &["m".to_string()], 2048).map_err(|e| e.to_string())
    }

    #[test]
    fn input_and_instructions_become_the_chat_and_the_rest_is_refused_by_name() {
        let ok = call(r#"{"input": "Hi", "instructions": "Be brief.", "max_output_tokens": 9}"#).unwrap();
        let messages = match &ok.prompts[0] {
            Prompt::Chat(m) => m.iter().map(|m| (m.role.as_str(), m.content.as_str())).collect::<Vec<_>>(),
            Prompt::Text(_) => Vec::new(),
        };
        assert_eq!(messages, [("system", "Be brief."), ("user", "Hi")]);
        assert_eq!((ok.max_tokens, ok.max_tokens_given, ok.stream), (9, true, false));
        assert!(call(r#"{"input": "Hi", "stream": true}"#).unwrap().stream);
        let parts = r#"{"input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"}]}]}"#;
        assert!(call(parts).is_ok());
        for (body, error) in [
            (r#"{}"#, "input: is required"),
            (r#"{"input": "Hi", "tools": []}"#, "tools: is not supported by this server"),
            (
                r#"{"input": [{"type": "function_call_output", "output": "x"}]}"#,
                "input[0].output: is not supported",
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
