//! What a generation's answer must be, checked: `response_format` (and the Responses API's
//! `text.format`) as a JSON schema, `tools` with `tool_choice` and `parallel_tool_calls` as the
//! tools offered. The schemas themselves are compiled later, for the model's vocabulary
//! ([`crate::infer::Generator`]), where a keyword the grammar engine lacks is refused by name.

use morph_decoder::Tool;
use serde_json::{Value, json};

use crate::error::CallError;
use crate::infer::{Output, ToolChoice, ToolUse};

/// How a call writes each tool: the Chat Completions API nests it (`{"type": "function",
/// "function": {"name", …}}`), the Responses API does not (`{"type": "function", "name", …}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ToolShape {
    Nested,
    Flat,
}

/// The fields of a call that shape its answer, as sent.
#[derive(Debug, Default)]
pub(super) struct OutputFields {
    /// `response_format` (chat, completions) or `text.format` (responses).
    pub format: Option<(Value, &'static str)>,
    pub tools: Option<Value>,
    pub tool_choice: Option<Value>,
    pub parallel_tool_calls: Option<bool>,
}

/// The answer's shape from its fields.
pub(super) fn output(fields: OutputFields, shape: ToolShape) -> Result<Output, CallError> {
    let json = match fields.format {
        Some((value, field)) => json_schema(value, field)?,
        None => None,
    };
    let tools = match fields.tools {
        None | Some(Value::Null) => None,
        Some(Value::Array(list)) if list.is_empty() => None,
        Some(Value::Array(list)) => {
            let tools =
                list.iter().enumerate().map(|(i, t)| tool(t, i, shape)).collect::<Result<Vec<_>, _>>()?;
            if let Some(twice) =
                tools.iter().enumerate().find(|(i, t)| tools[..*i].iter().any(|u| u.name == t.name))
            {
                return Err(CallError::validation("tools", format!("names {:?} twice", twice.1.name)));
            }
            Some(tools)
        }
        Some(_) => return Err(CallError::validation("tools", "must be an array of tools")),
    };
    let choice = tool_choice(fields.tool_choice, tools.as_deref(), shape)?;
    match (json, tools, choice) {
        (Some(_), Some(_), Some(_)) => Err(CallError::validation(
            "response_format",
            "cannot be given with tools here: ask for one or the other",
        )),
        (Some((schema, field)), _, _) => Ok(Output::Json { schema, field }),
        (None, Some(tools), Some(choice)) => {
            Ok(Output::Tools(ToolUse { tools, choice, parallel: fields.parallel_tool_calls.unwrap_or(true) }))
        }
        (None, _, _) => Ok(Output::Text),
    }
}

/// A `response_format` / `text.format`: `text` (none), `json_object` (any object), or
/// `json_schema` with its `schema`.
fn json_schema(value: Value, field: &'static str) -> Result<Option<(Value, &'static str)>, CallError> {
    let kind = value.get("type").and_then(Value::as_str);
    match kind {
        Some("text") => known_keys(&value, field, &["type"]).map(|()| None),
        Some("json_object") => {
            known_keys(&value, field, &["type"])?;
            Ok(Some((json!({"type": "object"}), field)))
        }
        Some("json_schema") => {
            // Chat nests the schema under `json_schema`; the Responses API gives it beside `type`.
            known_keys(&value, field, &["type", "json_schema", "name", "description", "schema", "strict"])?;
            let nested = value.get("json_schema");
            if let Some(spec) = nested {
                known_keys(
                    spec,
                    &format!("{field}.json_schema"),
                    &["name", "description", "schema", "strict"],
                )?;
            }
            let spec = nested.unwrap_or(&value);
            let schema = spec.get("schema").cloned().unwrap_or_else(|| json!({}));
            if !schema.is_object() {
                return Err(CallError::validation(field, "json_schema.schema must be a JSON schema object"));
            }
            if spec.get("name").and_then(Value::as_str).is_none() {
                return Err(CallError::validation(field, "json_schema.name is required (a string)"));
            }
            Ok(Some((schema, field)))
        }
        _ => Err(CallError::validation(
            field,
            "must be {\"type\": \"text\"}, {\"type\": \"json_object\"} or {\"type\": \"json_schema\", ...}",
        )),
    }
}

/// Refuses, by name, a key of the object `value` (at `field`) that is not one of `known`: a
/// field the server does not know is never ignored.
fn known_keys(value: &Value, field: &str, known: &[&str]) -> Result<(), CallError> {
    let unknown = value.as_object().and_then(|o| o.keys().find(|k| !known.contains(&k.as_str())));
    match unknown {
        Some(key) => Err(CallError::validation(
            format!("{field}.{key}"),
            format!("is not supported (the fields taken here: {})", known.join(", ")),
        )),
        None => Ok(()),
    }
}

/// Tool `i` of the call, in `shape`; only functions are tools here.
fn tool(value: &Value, i: usize, shape: ToolShape) -> Result<Tool, CallError> {
    let at = |what: &str| format!("tools[{i}]{what}");
    if value.get("type").and_then(Value::as_str) != Some("function") {
        return Err(CallError::validation(
            at(".type"),
            "must be \"function\": only function tools are served",
        ));
    }
    const FUNCTION: [&str; 4] = ["name", "description", "parameters", "strict"];
    let (function, prefix) = match shape {
        ToolShape::Nested => {
            known_keys(value, &at(""), &["type", "function"])?;
            let function =
                value.get("function").ok_or_else(|| CallError::validation(at(".function"), "is required"))?;
            known_keys(function, &at(".function"), &FUNCTION)?;
            (function, ".function")
        }
        ToolShape::Flat => {
            known_keys(value, &at(""), &[&["type"][..], &FUNCTION].concat())?;
            (value, "")
        }
    };
    let name = function.get("name").and_then(Value::as_str).unwrap_or_default();
    let valid = !name.is_empty()
        && name.len() <= 64
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !valid {
        return Err(CallError::validation(
            at(&format!("{prefix}.name")),
            "must be 1 to 64 letters, digits, _ or -",
        ));
    }
    let parameters = match function.get("parameters") {
        None | Some(Value::Null) => json!({"type": "object", "properties": {}}),
        Some(object @ Value::Object(_)) => object.clone(),
        Some(_) => {
            return Err(CallError::validation(
                at(&format!("{prefix}.parameters")),
                "must be a JSON schema object",
            ));
        }
    };
    let description = function.get("description").and_then(Value::as_str).map(str::to_string);
    let strict = match function.get("strict") {
        Some(Value::Bool(strict)) => *strict,
        // OpenAI's defaults: strict in the Responses API, not in chat.
        None | Some(Value::Null) => shape == ToolShape::Flat,
        Some(_) => {
            return Err(CallError::validation(at(&format!("{prefix}.strict")), "must be true or false"));
        }
    };
    Ok(Tool { name: name.to_string(), description, parameters, strict })
}

/// `tool_choice`, which needs tools; `None` when no tool may be called (no tools, or `"none"`).
fn tool_choice(
    value: Option<Value>,
    tools: Option<&[Tool]>,
    shape: ToolShape,
) -> Result<Option<ToolChoice>, CallError> {
    let field = "tool_choice";
    let choice = match value {
        None | Some(Value::Null) => return Ok(tools.map(|_| ToolChoice::Auto)),
        Some(Value::String(word)) => match word.as_str() {
            "none" => return Ok(None),
            "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
            _ => {
                return Err(CallError::validation(
                    field,
                    "must be \"none\", \"auto\", \"required\" or a function",
                ));
            }
        },
        Some(object) => {
            let name = match shape {
                ToolShape::Nested => object.pointer("/function/name"),
                ToolShape::Flat => object.get("name"),
            };
            match (object.get("type").and_then(Value::as_str), name.and_then(Value::as_str)) {
                (Some("function"), Some(name)) => ToolChoice::Named(name.to_string()),
                _ => {
                    return Err(CallError::validation(
                        field,
                        "must name a function: {\"type\": \"function\", ...}",
                    ));
                }
            }
        }
    };
    let Some(tools) = tools else {
        return Err(CallError::validation(field, "needs tools to choose from"));
    };
    if let ToolChoice::Named(name) = &choice
        && !tools.iter().any(|t| &t.name == name)
    {
        return Err(CallError::validation(field, format!("names {name:?}, which is not among the tools")));
    }
    Ok(Some(choice))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(fields: Value) -> Result<Output, String> {
        let get = |k: &str| fields.get(k).cloned();
        let fields = OutputFields {
            format: get("response_format").map(|v| (v, "response_format")),
            tools: get("tools"),
            tool_choice: get("tool_choice"),
            parallel_tool_calls: get("parallel_tool_calls").and_then(|v| v.as_bool()),
        };
        output(fields, ToolShape::Nested).map_err(|e| e.to_string())
    }

    fn weather() -> Value {
        json!([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}])
    }

    #[test]
    fn formats_and_tools_become_the_answer_s_shape() {
        assert_eq!(chat(json!({})), Ok(Output::Text));
        assert_eq!(chat(json!({"response_format": {"type": "text"}})), Ok(Output::Text));
        let object = chat(json!({"response_format": {"type": "json_object"}})).unwrap();
        assert_eq!(object, Output::Json { schema: json!({"type": "object"}), field: "response_format" });
        let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
        let given = json!({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema, "strict": true}}});
        assert_eq!(chat(given).unwrap(), Output::Json { schema, field: "response_format" });
        let Output::Tools(used) = chat(json!({"tools": weather(), "tool_choice": "required"})).unwrap()
        else {
            panic!()
        };
        assert_eq!(
            (used.tools[0].name.as_str(), &used.choice, used.parallel),
            ("get_weather", &ToolChoice::Required, true)
        );
        let named = json!({"tools": weather(), "tool_choice": {"type": "function", "function": {"name": "get_weather"}}, "parallel_tool_calls": false});
        let Output::Tools(used) = chat(named).unwrap() else { panic!() };
        assert_eq!((used.choice, used.parallel), (ToolChoice::Named("get_weather".into()), false));
        assert_eq!(chat(json!({"tools": weather(), "tool_choice": "none"})), Ok(Output::Text));
    }

    #[test]
    fn a_tool_is_strict_as_openai_s_apis_default_unless_it_says() {
        let strict = |tool: Value, shape: ToolShape| {
            let fields = OutputFields { tools: Some(json!([tool])), ..OutputFields::default() };
            match output(fields, shape) {
                Ok(Output::Tools(used)) => Ok(used.tools[0].strict),
                other => Err(format!("{other:?}")),
            }
        };
        let nested = |extra: Value| {
            let mut function = json!({"name": "f"});
            function.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            json!({"type": "function", "function": function})
        };
        let flat = |extra: Value| {
            let mut tool = json!({"type": "function", "name": "f"});
            tool.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            tool
        };
        assert_eq!(strict(nested(json!({})), ToolShape::Nested), Ok(false));
        assert_eq!(strict(nested(json!({"strict": true})), ToolShape::Nested), Ok(true));
        assert_eq!(strict(flat(json!({})), ToolShape::Flat), Ok(true));
        assert_eq!(strict(flat(json!({"strict": null})), ToolShape::Flat), Ok(true));
        assert_eq!(strict(flat(json!({"strict": false})), ToolShape::Flat), Ok(false));
        let refused = strict(nested(json!({"strict": "yes"})), ToolShape::Nested).expect_err("refused");
        assert!(refused.contains("tools[0].function.strict"), "{refused}");
    }

    #[test]
    fn a_bad_format_or_tool_is_refused_by_its_field() {
        let cases = [
            (json!({"response_format": {"type": "yaml"}}), "response_format: must be"),
            (
                json!({"response_format": {"type": "json_schema", "json_schema": {"schema": {}}}}),
                "json_schema.name is required",
            ),
            (json!({"tools": [{"type": "retrieval"}]}), "tools[0].type: must be \"function\""),
            (json!({"tools": [{"type": "function", "function": {"name": "a b"}}]}), "tools[0].function.name"),
            (json!({"tool_choice": "required"}), "tool_choice: needs tools"),
            (
                json!({"tools": weather(), "tool_choice": {"type": "function", "function": {"name": "other"}}}),
                "not among the tools",
            ),
            (json!({"tools": [weather()[0], weather()[0]]}), "names \"get_weather\" twice"),
            (
                json!({"tools": weather(), "tool_choice": "required", "response_format": {"type": "json_object"}}),
                "ask for one or the other",
            ),
            // A field the server does not know, at any depth, is named, never ignored.
            (
                json!({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}, "bogus": 1}}}),
                "response_format.json_schema.bogus: is not supported",
            ),
            (json!({"response_format": {"type": "json_object", "schema": {}}}), "response_format.schema"),
            (
                json!({"tools": [{"type": "function", "bogus": 1, "function": {"name": "f"}}]}),
                "tools[0].bogus: is not supported",
            ),
            (
                json!({"tools": [{"type": "function", "function": {"name": "f", "bogus": 2}}]}),
                "tools[0].function.bogus",
            ),
        ];
        for (fields, expected) in cases {
            let err = chat(fields.clone()).expect_err("refused");
            assert!(err.contains(expected), "{fields}: {err}");
        }
    }
}
