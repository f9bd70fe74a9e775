//! Tool calls read back out of a choice's text, for a call that offered tools: the calls of
//! offered tools in the model's format become the answer's `tool_calls` (finish reason
//! `tool_calls`, unless there is none or the last was left open, cut by the token limit or a
//! stop string: then `length` or `stop`); text without one stays the answer's text. Where the
//! answer must be calls, they are read as they are written ([`CallScanner`]), the same whole
//! or streamed; where it may be either, text as it comes and each call once whole
//! ([`AutoReader`]).

use morph_decoder::{AutoPiece, AutoReader, CallPiece, CallScanner, FinishReason, ToolCall, ToolFormat};

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

/// A choice's answer: its text, or calls (with any text outside them, and whether the text
/// left a call open, as a token limit cuts one).
#[derive(Debug)]
pub(super) enum Answer {
    Text(String),
    Calls { text: Option<String>, calls: Vec<ToolCallOut>, left_open: bool },
}

/// How an answer that must be, or holds, calls ended: the generation's reason, the calls it
/// holds, and whether it left one open.
#[derive(Debug, Clone, Copy)]
pub(super) struct CallsEnd {
    pub reason: FinishReason,
    pub calls: usize,
    pub left_open: bool,
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
        if self.forced {
            return self.read_forced(&text);
        }
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
            false => Answer::Calls {
                text: (!outside.is_empty()).then(|| outside.to_string()),
                calls,
                left_open: false,
            },
        }
    }

    /// Where the answer must be calls: the calls of `text` as a stream gives them (a
    /// [`CallScanner`]'s, arguments as written), and no text (outside the calls lies only the
    /// markup of one the token limit cut before its name); the last may be left open, its
    /// arguments cut, as OpenAI answers a call the limit cut.
    fn read_forced(&self, text: &str) -> Answer {
        let mut scanner = CallScanner::new(self.format);
        let mut calls: Vec<ToolCallOut> = Vec::new();
        for piece in scanner.feed(text) {
            match piece {
                CallPiece::Begin { name } => calls.push(ToolCallOut {
                    id: call_id(),
                    kind: "function",
                    function: FunctionCallOut { name, arguments: String::new() },
                }),
                CallPiece::Arguments(more) => {
                    if let Some(call) = calls.last_mut() {
                        call.function.arguments.push_str(&more);
                    }
                }
            }
        }
        Answer::Calls { text: None, calls, left_open: scanner.in_a_call() }
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
