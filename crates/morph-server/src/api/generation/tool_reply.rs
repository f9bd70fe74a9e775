//! Tool calls read back out of a choice's text, for a call that offered tools: the calls of
//! offered tools in the model's format become the answer's `tool_calls` (finish reason
//! `tool_calls`); text without one stays the answer's text. Where the answer must be calls, a
//! stream gives them as they are written ([`CallScanner`]); where it may be either, text as it
//! comes and each call once whole ([`AutoReader`]).

use morph_decoder::{AutoPiece, AutoReader, CallScanner, ToolCall, ToolFormat};

use super::answers::{FunctionCallOut, ToolCallOut};
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

    /// A reader of text and calls as they come, where the answer may be either.
    pub(super) fn auto(&self) -> Option<AutoReader> {
        (!self.forced).then(|| AutoReader::new(self.format, self.names.clone()))
    }

    /// `text` as an answer: read by `reader` where the call offered tools, else text.
    pub(super) fn answer(reader: Option<&Self>, text: String) -> Answer {
        match reader {
            Some(reader) => reader.read(text),
            None => Answer::Text(text),
        }
    }

    /// `text` read as an answer: its calls of offered tools, and the text outside them.
    pub(super) fn read(&self, text: String) -> Answer {
        let mut reader = AutoReader::new(self.format, self.names.clone());
        let mut pieces = reader.feed(&text);
        pieces.extend(reader.finish(&text));
        let (mut outside, mut calls) = (String::new(), Vec::new());
        for piece in pieces {
            match piece {
                AutoPiece::Text(more) => outside.push_str(&more),
                AutoPiece::Call(call) => calls.push(out(call)),
            }
        }
        let outside = outside.trim();
        match calls.is_empty() {
            true => Answer::Text(text),
            false => Answer::Calls { text: (!outside.is_empty()).then(|| outside.to_string()), calls },
        }
    }
}

/// A fresh id for a call.
pub(super) fn call_id() -> String {
    format!("call_{:016x}", rand::random::<u64>())
}

/// A call as the OpenAI API answers it, with an id of its own.
pub(super) fn out(ToolCall { name, arguments }: ToolCall) -> ToolCallOut {
    ToolCallOut {
        id: call_id(),
        kind: "function",
        function: FunctionCallOut { name, arguments: arguments.to_string() },
    }
}
