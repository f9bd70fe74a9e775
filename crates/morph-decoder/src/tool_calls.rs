//! Tool calls in the formats models are trained on: how the offered tools reach the prompt, the
//! grammar that makes a model call one, and the calls read back out of its text.
//!
//! A chat template that writes `tools` itself gets them (Hugging Face's convention), and its
//! format is read from what it writes: Hermes' `<tool_call>` blocks (Qwen 2.5, Hermes, SmolLM3),
//! Mistral's `[TOOL_CALLS]` list, Llama 3's bare JSON object. A template that knows no tools
//! (SmolLM2's) gets them in a system message in Hermes' format, with earlier calls and results
//! written into the turns as Hermes writes them.

use serde_json::{Value, json};

use crate::chat::Message;
use crate::grammar::GrammarSource;

/// A function the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    pub name: String,
    pub description: Option<String>,
    /// Its arguments' JSON schema (an object).
    pub parameters: Value,
}

impl Tool {
    /// As the OpenAI API and Hugging Face's templates write a tool.
    pub fn as_json(&self) -> Value {
        let mut function = json!({"name": self.name, "parameters": self.parameters});
        if let Some(description) = &self.description {
            function["description"] = json!(description);
        }
        json!({"type": "function", "function": function})
    }
}

/// A call read out of the model's text.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub name: String,
    pub arguments: Value,
}

/// How a model writes its calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolFormat {
    /// `<tool_call>\n{"name": …, "arguments": …}\n</tool_call>`, one block per call.
    Hermes,
    /// `[TOOL_CALLS] [{"name": …, "arguments": …}, …]`.
    Mistral,
    /// One `{"name": …, "parameters": …}` object as the whole answer.
    Llama3,
}

impl ToolFormat {
    /// The format a chat template writes tools in (Hermes where it writes none).
    pub fn of_template(source: &str) -> Self {
        if source.contains("[TOOL_CALLS]") {
            Self::Mistral
        } else if source.contains("<|python_tag|>") || source.contains("ipython") {
            Self::Llama3
        } else {
            Self::Hermes
        }
    }

    /// The name the arguments go under.
    fn arguments_key(self) -> &'static str {
        match self {
            Self::Llama3 => "parameters",
            Self::Hermes | Self::Mistral => "arguments",
        }
    }

    /// A grammar for an answer that is calls only: of `tools`, at least one, several where
    /// `parallel`, each call's arguments valid against its tool's schema.
    pub fn grammar(self, tools: &[Tool], parallel: bool) -> GrammarSource {
        let key = self.arguments_key();
        let calls: Vec<String> = tools
            .iter()
            .map(|tool| {
                // The name is written before the arguments, as every format's examples do.
                let head = format!("{{\"name\":{},\"{key}\":", json!(tool.name));
                format!(
                    "{} %json {} \"}}\"",
                    lark_literal(&head),
                    GrammarSource::json_in_lark(&tool.parameters)
                )
            })
            .collect();
        let call = format!("call: {}", calls.join("\n    | "));
        let start = match (self, parallel) {
            (Self::Hermes, true) => r#"start: block ("\n" block)*"#,
            (Self::Hermes, false) => "start: block",
            (Self::Mistral, true) => r#"start: "[TOOL_CALLS][" call ("," call)* "]""#,
            (Self::Mistral, false) => r#"start: "[TOOL_CALLS][" call "]""#,
            // Llama 3's format holds one call.
            (Self::Llama3, _) => "start: call",
        };
        let block = r#"block: "<tool_call>\n" call "\n</tool_call>""#;
        GrammarSource::Lark(format!("{start}\n{block}\n{call}\n"))
    }

    /// The calls in `text`, and the text outside them; `None` when it holds no call that parses.
    pub fn parse(self, text: &str) -> Option<(Vec<ToolCall>, String)> {
        let (calls, rest) = match self {
            Self::Hermes => hermes_calls(text),
            Self::Mistral => {
                let (before, list) = text.split_once("[TOOL_CALLS]")?;
                let calls = serde_json::from_str::<Vec<Value>>(list.trim()).ok()?;
                (
                    calls.iter().map(|c| call(c, "arguments")).collect::<Option<_>>()?,
                    before.trim().to_string(),
                )
            }
            Self::Llama3 => {
                let body = text.trim().trim_start_matches("<|python_tag|>");
                (vec![call(&serde_json::from_str(body).ok()?, "parameters")?], String::new())
            }
        };
        (!calls.is_empty()).then_some((calls, rest))
    }
}

/// `text` as a Lark string literal.
fn lark_literal(text: &str) -> String {
    json!(text).to_string()
}

/// Hermes' blocks in `text` (a last block left open at the end of the text counts), and the
/// text outside them.
fn hermes_calls(text: &str) -> (Vec<ToolCall>, String) {
    const OPEN: &str = "<tool_call>";
    const CLOSE: &str = "</tool_call>";
    let (mut calls, mut rest, mut left) = (Vec::new(), String::new(), text);
    while let Some(at) = left.find(OPEN) {
        rest.push_str(&left[..at]);
        let body = &left[at + OPEN.len()..];
        let (inside, after) = body.split_once(CLOSE).unwrap_or((body, ""));
        match serde_json::from_str::<Value>(inside.trim()).ok().and_then(|v| call(&v, "arguments")) {
            Some(c) => calls.push(c),
            None => rest.push_str(&left[at..at + OPEN.len() + inside.len()]),
        }
        left = after;
    }
    rest.push_str(left);
    (calls, rest.trim().to_string())
}

/// A call object `{"name": …, key: {…}}` (arguments given as a JSON string read too).
fn call(value: &Value, key: &str) -> Option<ToolCall> {
    let name = value.get("name")?.as_str()?.to_string();
    let arguments = match value.get(key).or_else(|| value.get("arguments")) {
        Some(Value::String(text)) => serde_json::from_str(text).ok()?,
        Some(object @ Value::Object(_)) => object.clone(),
        None => json!({}),
        Some(_) => return None,
    };
    Some(ToolCall { name, arguments })
}

/// The turns for a template that knows no tools: `tools` described in the system message (the
/// conversation's own first, if it has one), each earlier call written into its assistant turn
/// and each result into a user turn, in Hermes' format.
pub fn fold_into_turns(messages: &[Message], tools: &[Tool]) -> Vec<Message> {
    let listed: Vec<String> = tools.iter().map(|t| t.as_json().to_string()).collect();
    let instructions = format!(
        "You can call functions to answer. The functions, as JSON schemas:\n<tools>\n{}\n</tools>\n\
         To call one, answer with a JSON object of its name and arguments inside <tool_call></tool_call> tags:\n\
         <tool_call>\n{{\"name\": \"function name\", \"arguments\": {{\"argument\": \"value\"}}}}\n</tool_call>",
        listed.join("\n")
    );
    let mut out = Vec::with_capacity(messages.len() + 1);
    match messages.first() {
        Some(first) if first.role == "system" => {
            out.push(Message::new("system", &format!("{}\n\n{instructions}", first.content)));
        }
        _ => out.push(Message::new("system", &instructions)),
    }
    let skip = usize::from(messages.first().is_some_and(|m| m.role == "system"));
    for message in &messages[skip..] {
        match message.role.as_str() {
            "tool" => {
                let result = format!("<tool_response>\n{}\n</tool_response>", message.content);
                match out.last_mut() {
                    // Results of one round go in one user turn.
                    Some(last) if last.role == "user" && last.content.ends_with("</tool_response>") => {
                        last.content = format!("{}\n{result}", last.content);
                    }
                    _ => out.push(Message::new("user", &result)),
                }
            }
            "assistant" if !message.tool_calls.is_empty() => {
                let blocks = message.tool_calls.iter().map(|c| {
                    let function = &c["function"];
                    let call = json!({"name": function["name"], "arguments": function["arguments"]});
                    format!("<tool_call>\n{call}\n</tool_call>")
                });
                let text = std::iter::once(message.content.clone()).chain(blocks).filter(|t| !t.is_empty());
                out.push(Message::new("assistant", &text.collect::<Vec<_>>().join("\n")));
            }
            _ => out.push(Message { tool_calls: Vec::new(), tool_call_id: None, ..message.clone() }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weather() -> Tool {
        Tool {
            name: "get_weather".into(),
            description: Some("The weather in a city".into()),
            parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        }
    }

    #[test]
    fn calls_are_read_in_each_format_and_text_without_one_is_not_a_call() {
        let hermes = "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Oslo\\\"}\"}";
        let (calls, rest) = ToolFormat::Hermes.parse(hermes).expect("two calls");
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0], ToolCall { name: "get_weather".into(), arguments: json!({"city": "Paris"}) });
        assert_eq!(calls[1].arguments, json!({"city": "Oslo"}));
        assert_eq!(rest, "Let me look.");
        let mistral = "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}]";
        assert_eq!(
            ToolFormat::Mistral.parse(mistral).expect("a call").0[0].arguments,
            json!({"city": "Rome"})
        );
        let llama = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Lima\"}}";
        assert_eq!(ToolFormat::Llama3.parse(llama).expect("a call").0[0].name, "get_weather");
        for text in ["It is sunny.", "<tool_call>\n{\"name\": 3}\n</tool_call>", "{\"city\": 1}"] {
            assert!(
                ToolFormat::Hermes.parse(text).is_none() && ToolFormat::Llama3.parse(text).is_none(),
                "{text}"
            );
        }
    }

    #[test]
    fn a_template_s_format_is_read_from_what_it_writes() {
        assert_eq!(ToolFormat::of_template("{{ '[TOOL_CALLS]' }}"), ToolFormat::Mistral);
        assert_eq!(ToolFormat::of_template("<|start_header_id|>ipython"), ToolFormat::Llama3);
        assert_eq!(ToolFormat::of_template("<tool_call>"), ToolFormat::Hermes);
    }

    #[test]
    fn a_template_without_tools_gets_them_in_the_system_turn_and_results_in_user_turns() {
        let mut call = Message::new("assistant", "");
        call.tool_calls = vec![
            json!({"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}),
        ];
        let mut result = Message::new("tool", "18 C");
        result.tool_call_id = Some("call_0".into());
        let turns = fold_into_turns(
            &[Message::new("system", "Be brief."), Message::new("user", "Weather?"), call, result],
            &[weather()],
        );
        let roles: Vec<&str> = turns.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "user"]);
        assert!(
            turns[0].content.starts_with("Be brief.\n\n") && turns[0].content.contains("\"get_weather\"")
        );
        assert_eq!(
            turns[2].content,
            "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}\n</tool_call>"
        );
        assert_eq!(turns[3].content, "<tool_response>\n18 C\n</tool_response>");
    }

    #[test]
    fn the_calls_grammar_names_every_tool_in_the_format_s_frame() {
        let GrammarSource::Lark(lark) = ToolFormat::Hermes.grammar(&[weather()], false) else { panic!() };
        assert!(lark.starts_with("start: block\n"), "{lark}");
        assert!(lark.contains(r#""{\"name\":\"get_weather\",\"arguments\":" %json {"#), "{lark}");
        let GrammarSource::Lark(lark) = ToolFormat::Mistral.grammar(&[weather()], true) else { panic!() };
        assert!(lark.contains(r#"("," call)*"#), "{lark}");
    }
}
