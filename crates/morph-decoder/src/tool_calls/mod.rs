//! Tool calls in the formats models are trained on: how the offered tools reach the prompt, the
//! grammar that makes a model call one, and the calls read back out of its text.
//!
//! A chat template that writes `tools` itself gets them (Hugging Face's convention), and its
//! format is read from what it writes: Hermes' `<tool_call>` blocks (Qwen 2.5, Hermes, SmolLM3),
//! Mistral's `[TOOL_CALLS]` list, Llama 3's bare JSON object. A template that knows no tools
//! gets them folded into its turns ([`fold_into_turns`]): Gemma's (turns of
//! `<start_of_turn>`) in Gemma's Python-call format, any other (SmolLM2's) in Hermes' format.

mod auto;
mod auto_grammar;
mod fold;
mod json_strings;
mod pythonic;
mod scanner;

pub use auto::{AutoPiece, AutoReader};
pub use fold::fold_into_turns;
pub use scanner::{CallPiece, CallScanner};
use serde_json::{Value, json};

use crate::grammar::GrammarSource;

/// A function the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    pub name: String,
    pub description: Option<String>,
    /// Its arguments' JSON schema (an object).
    pub parameters: Value,
    /// Its calls' arguments are held to `parameters` even where the model is free to answer
    /// in text (OpenAI's `strict`); a call it must make is held to them whatever this says.
    pub strict: bool,
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
    /// A Python list of calls, `[get_weather(city="Paris"), get_time()]`, bare or in a
    /// `tool_code` block, as Google's function-calling guide for Gemma prompts for.
    Gemma,
}

/// Whether a call opens at a place in the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opening {
    Yes,
    /// The text ends before it can tell.
    Maybe,
    No,
}

impl ToolFormat {
    /// The format a chat template writes tools in, where it writes them.
    pub fn of_template(source: &str) -> Self {
        if source.contains(MISTRAL_OPEN) {
            Self::Mistral
        } else if source.contains("<|python_tag|>") || source.contains("ipython") {
            Self::Llama3
        } else {
            Self::Hermes
        }
    }

    /// The format tools are folded into the turns of a template that writes none in: Gemma's
    /// for Gemma's turns, else Hermes'.
    pub fn folded_into(source: &str) -> Self {
        if source.contains("<start_of_turn>") { Self::Gemma } else { Self::Hermes }
    }

    /// The name the arguments go under.
    fn arguments_key(self) -> &'static str {
        match self {
            Self::Llama3 => "parameters",
            Self::Hermes | Self::Mistral | Self::Gemma => "arguments",
        }
    }

    /// A grammar for an answer that is calls only: of `tools`, at least one, several where
    /// `parallel`, each call's arguments valid against its tool's schema.
    pub fn grammar(self, tools: &[Tool], parallel: bool) -> GrammarSource {
        let start = match self {
            Self::Gemma => return pythonic::grammar(tools, parallel),
            // Llama 3's format holds one call.
            Self::Llama3 => "start: call".to_string(),
            // The opening, then what a free answer writes after it.
            Self::Hermes | Self::Mistral => {
                let openings = self.openings(tools, parallel);
                let alternatives: Vec<String> =
                    openings.iter().map(|o| format!("{} {}", o.literal, o.rest)).collect();
                format!("start: {}", alternatives.join(" | "))
            }
        };
        GrammarSource::Lark(format!("{start}\n{}\n", self.call_rule(tools)))
    }

    /// The grammar's `call` rule: a call of any of `tools`, its arguments valid against the
    /// tool's schema.
    fn call_rule(self, tools: &[Tool]) -> String {
        if self == Self::Gemma {
            return pythonic::call_rule(tools);
        }
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
        format!("call: {}", calls.join("\n    | "))
    }

    /// The calls in `text`, and the text outside them; `None` when it holds no call that parses.
    pub fn parse(self, text: &str) -> Option<(Vec<ToolCall>, String)> {
        let (calls, rest) = match self {
            Self::Hermes => hermes_calls(text),
            Self::Mistral => {
                let (before, list) = text.split_once(MISTRAL_OPEN)?;
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
            Self::Gemma => pythonic::parse(text)?,
        };
        (!calls.is_empty()).then_some((calls, rest))
    }

    /// The first place at or after byte `from` of `text` where a call opens or may open (the
    /// text ends before it can tell), and whether it surely does; `None` where none can.
    fn call_opening(self, text: &str, from: usize) -> Option<(usize, bool)> {
        text[from..].char_indices().map(|(i, _)| from + i).find_map(|at| match self.opens_at(text, at) {
            Opening::Yes => Some((at, true)),
            Opening::Maybe => Some((at, false)),
            Opening::No => None,
        })
    }

    /// Whether a call opens at byte `at` of `text`.
    fn opens_at(self, text: &str, at: usize) -> Opening {
        let rest = &text[at..];
        match self {
            Self::Hermes => opens_with(rest, HERMES_OPEN),
            Self::Mistral => opens_with(rest, MISTRAL_OPEN),
            // Llama 3's call is the whole answer: a JSON object, after spaces.
            Self::Llama3 if at == 0 => match rest.trim_start() {
                "" => Opening::Maybe,
                body if body.starts_with('{') => Opening::Yes,
                body => opens_with(body, "<|python_tag|>"),
            },
            Self::Llama3 => Opening::No,
            Self::Gemma => match opens_with(rest, pythonic::FENCE) {
                Opening::No => pythonic::opens(rest),
                opening => opening,
            },
        }
    }
}

/// Whether `rest` starts with `marker` (or is cut short inside it).
fn opens_with(rest: &str, marker: &str) -> Opening {
    if rest.starts_with(marker) {
        Opening::Yes
    } else if !rest.is_empty() && marker.starts_with(rest) {
        Opening::Maybe
    } else {
        Opening::No
    }
}

/// `text` as a Lark string literal.
fn lark_literal(text: &str) -> String {
    json!(text).to_string()
}

/// Hermes' blocks in `text` (a last block left open at the end of the text counts), and the
/// text outside them.
fn hermes_calls(text: &str) -> (Vec<ToolCall>, String) {
    let (mut calls, mut rest, mut left) = (Vec::new(), String::new(), text);
    while let Some(at) = left.find(HERMES_OPEN) {
        rest.push_str(&left[..at]);
        let body = &left[at + HERMES_OPEN.len()..];
        // A body that is not JSON closes at the first tag, wherever it is.
        let close = hermes_close(body).or_else(|| body.find(HERMES_CLOSE));
        let (inside, after) = close.map_or((body, ""), |at| (&body[..at], &body[at + HERMES_CLOSE.len()..]));
        match hermes_block(inside) {
            Some(c) => calls.push(c),
            None => rest.push_str(&left[at..at + HERMES_OPEN.len() + inside.len()]),
        }
        left = after;
    }
    rest.push_str(left);
    (calls, rest.trim().to_string())
}

const HERMES_OPEN: &str = "<tool_call>";
const MISTRAL_OPEN: &str = "[TOOL_CALLS]";
const HERMES_CLOSE: &str = "</tool_call>";

/// Where the Hermes block whose body starts `body` closes: the first `</tool_call>` outside the
/// JSON strings of its call (an argument may hold the tag); `None` while none has come.
fn hermes_close(body: &str) -> Option<usize> {
    let mut strings = json_strings::JsonStrings::default();
    body.char_indices()
        .find(|&(at, c)| strings.outside(c) && body[at..].starts_with(HERMES_CLOSE))
        .map(|(at, _)| at)
}

/// The call inside one of Hermes' blocks.
fn hermes_block(inside: &str) -> Option<ToolCall> {
    serde_json::from_str::<Value>(inside.trim()).ok().and_then(|v| call(&v, "arguments"))
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

#[cfg(test)]
mod tests;
