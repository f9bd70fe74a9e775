//! Tool calls read back out of a choice's text, for a call that offered tools: the calls of
//! offered tools in the model's format become the answer's `tool_calls` (finish reason
//! `tool_calls`); text without one stays the answer's text. Where the answer must be calls, a
//! stream gives them as they are written ([`CallScanner`]).

use morph_decoder::{CallScanner, ToolCall, ToolFormat};

use super::responses::{FunctionCallOut, ToolCallOut};
use crate::infer::{Generator, Output, ToolChoice};

/// How a call's choices are read: the model's format, the tools it offered, and whether the
/// answer must be calls (then a stream gives them as they are written).
#[derive(Debug, Clone)]
pub(super) struct CallReader {
    format: ToolFormat,
    names: Vec<String>,
    forced: bool,
}

/// A choice's answer: its text, or calls (with any text outside them).
#[derive(Debug)]
pub(super) enum Answer {
    Text(String),
    Calls { text: Option<String>, calls: Vec<ToolCallOut> },
}

impl CallReader {
    /// The reader of a call whose answer is `output`: one where it offers tools.
    pub(super) fn of(output: &Output, generator: &Generator) -> Option<Self> {
        let Output::Tools(used) = output else { return None };
        let names = used.callable().into_iter().map(|t| t.name).collect();
        Some(Self { format: generator.tool_format(), names, forced: used.choice != ToolChoice::Auto })
    }

    /// A scanner of the calls as they are written, where the answer must be calls.
    pub(super) fn scanner(&self) -> Option<CallScanner> {
        self.forced.then(|| CallScanner::new(self.format))
    }

    /// `text` as an answer: read by `reader` where the call offered tools, else text.
    pub(super) fn answer(reader: Option<&Self>, text: String) -> Answer {
        match reader {
            Some(reader) => reader.read(text),
            None => Answer::Text(text),
        }
    }

    /// `text` read as calls where it holds calls of offered tools only.
    pub(super) fn read(&self, text: String) -> Answer {
        let Some((calls, rest)) = self.format.parse(&text) else { return Answer::Text(text) };
        if !calls.iter().all(|c| self.names.contains(&c.name)) {
            return Answer::Text(text);
        }
        let calls = calls.into_iter().map(out).collect();
        Answer::Calls { text: (!rest.is_empty()).then_some(rest), calls }
    }
}

/// A fresh id for a call.
pub(super) fn call_id() -> String {
    format!("call_{:016x}", rand::random::<u64>())
}

/// A call as the OpenAI API answers it, with an id of its own.
fn out(ToolCall { name, arguments }: ToolCall) -> ToolCallOut {
    ToolCallOut {
        id: call_id(),
        kind: "function",
        function: FunctionCallOut { name, arguments: arguments.to_string() },
    }
}
