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

/// What a forced answer's text has revealed of its calls so far.
#[derive(Debug, Clone, PartialEq)]
pub enum CallPiece {
    /// A call of this tool begins (its name is complete).
    Begin { name: String },
    /// More of the current call's arguments (a piece of their JSON text).
    Arguments(String),
}

/// Reads the calls of an answer held to [`ToolFormat::grammar`] as its text grows, so their
/// arguments can be streamed as they are written: each call is `{"name":"…","KEY":` then its
/// arguments, a JSON object, complete when its braces close.
#[derive(Debug, Clone)]
pub struct CallScanner {
    /// The name the arguments go under in this format.
    key: &'static str,
    /// Bytes of the text read so far.
    read: usize,
    /// Inside a call's arguments: their brace depth, and where a string stands.
    arguments: Option<Depth>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Depth {
    braces: usize,
    in_string: bool,
    escaped: bool,
}

impl CallScanner {
    pub fn new(format: ToolFormat) -> Self {
        Self { key: format.arguments_key(), read: 0, arguments: None }
    }

    /// What `text` (the whole text so far, grown since the last call) reveals beyond what was
    /// already told.
    pub fn feed(&mut self, text: &str) -> Vec<CallPiece> {
        let mut pieces = Vec::new();
        loop {
            let rest = &text[self.read.min(text.len())..];
            if rest.is_empty() {
                return pieces;
            }
            match &mut self.arguments {
                Some(depth) => {
                    let taken = depth.take(rest);
                    pieces.push(CallPiece::Arguments(rest[..taken].to_string()));
                    self.read += taken;
                    if depth.braces == 0 {
                        self.arguments = None;
                    }
                }
                None => {
                    let Some((skip, name, len)) = self.header(rest) else { return pieces };
                    self.read += skip + len;
                    self.arguments = Some(Depth::default());
                    pieces.push(CallPiece::Begin { name });
                }
            }
        }
    }

    /// Where the next call's header starts in `rest`, its tool's name, and its length; `None`
    /// until a whole header is there.
    fn header(&self, rest: &str) -> Option<(usize, String, usize)> {
        const OPEN: &str = "{\"name\":";
        let at = rest.find(OPEN)?;
        let after = &rest[at + OPEN.len()..];
        let mut names = serde_json::Deserializer::from_str(after).into_iter::<String>();
        let name = names.next()?.ok()?;
        let tail = &after[names.byte_offset()..];
        let between = format!(",\"{}\":", self.key);
        tail.starts_with(&between).then(|| (at, name, OPEN.len() + names.byte_offset() + between.len()))
    }
}

impl Depth {
    /// Bytes of `text` that belong to the arguments (all, or up to their closing brace).
    fn take(&mut self, text: &str) -> usize {
        for (i, c) in text.char_indices() {
            match (self.in_string, self.escaped, c) {
                (true, true, _) => self.escaped = false,
                (true, false, '\\') => self.escaped = true,
                (true, false, '"') => self.in_string = false,
                (false, _, '"') => self.in_string = true,
                (false, _, '{' | '[') => self.braces += 1,
                (false, _, '}' | ']') => {
                    self.braces = self.braces.saturating_sub(1);
                    if self.braces == 0 {
                        return i + 1;
                    }
                }
                _ => {}
            }
        }
        text.len()
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
    fn a_forced_answer_s_calls_are_read_as_the_text_grows() {
        let text = "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Pa}ris\",\"days\":[1,2]}}\n</tool_call>\n<tool_call>\n{\"name\":\"get_time\",\"arguments\":{}}\n</tool_call>";
        let mut scanner = CallScanner::new(ToolFormat::Hermes);
        let mut pieces = Vec::new();
        // Fed a few bytes at a time, as tokens arrive.
        for end in (1..=text.len()).filter(|&e| text.is_char_boundary(e)).step_by(3).chain([text.len()]) {
            pieces.extend(scanner.feed(&text[..end]));
        }
        let mut calls: Vec<(String, String)> = Vec::new();
        for piece in pieces {
            match piece {
                CallPiece::Begin { name } => calls.push((name, String::new())),
                CallPiece::Arguments(more) => calls.last_mut().expect("a call began").1.push_str(&more),
            }
        }
        let expected = [("get_weather", r#"{"city":"Pa}ris","days":[1,2]}"#), ("get_time", "{}")];
        assert_eq!(calls, expected.map(|(n, a)| (n.to_string(), a.to_string())));
        let mut llama = CallScanner::new(ToolFormat::Llama3);
        let got = llama.feed(r#"{"name":"f","parameters":{"a":1}}"#);
        assert_eq!(got, [CallPiece::Begin { name: "f".into() }, CallPiece::Arguments(r#"{"a":1}"#.into())]);
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
