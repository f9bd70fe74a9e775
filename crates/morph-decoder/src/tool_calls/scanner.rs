//! A forced answer's calls read as its text grows, so a stream can give each call's name and
//! then its arguments as they are written.

use serde_json::json;

use super::ToolFormat;
use super::json_strings::JsonStrings;
use super::pythonic::{self, Step};

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
/// arguments, a JSON object, complete when its braces close. Gemma's calls (Python's syntax)
/// are told argument by argument, each once its value is whole, written as JSON.
#[derive(Debug, Clone)]
pub struct CallScanner {
    /// The name the arguments go under in this format.
    key: &'static str,
    /// The calls are Gemma's: how many arguments the open one has told, inside one.
    pythonic: Option<Option<usize>>,
    /// Bytes of the text read so far.
    read: usize,
    /// Inside a call's arguments: their brace depth, and where a string stands.
    arguments: Option<Depth>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Depth {
    braces: usize,
    strings: JsonStrings,
}

impl CallScanner {
    pub fn new(format: ToolFormat) -> Self {
        Self {
            key: format.arguments_key(),
            pythonic: (format == ToolFormat::Gemma).then_some(None),
            read: 0,
            arguments: None,
        }
    }

    /// What `text` (the whole text so far, grown since the last call) reveals beyond what was
    /// already told.
    pub fn feed(&mut self, text: &str) -> Vec<CallPiece> {
        if let Some(inside) = self.pythonic {
            return self.feed_pythonic(text, inside);
        }
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

    /// The pieces of Gemma's calls whole in `text` since the last feed, `inside` a call that
    /// has told so many arguments, or not: its arguments written as a JSON object.
    fn feed_pythonic(&mut self, text: &str, mut inside: Option<usize>) -> Vec<CallPiece> {
        let mut pieces = Vec::new();
        while let Ok((step, len)) = pythonic::step(&text[self.read.min(text.len())..], inside.is_some()) {
            self.read += len;
            let (piece, next) = match (step, inside) {
                (Step::Open(name), _) => (CallPiece::Begin { name }, Some(0)),
                (Step::Keyword(key, value), Some(told)) => {
                    let comma = if told == 0 { "{" } else { "," };
                    (CallPiece::Arguments(format!("{comma}{}:{value}", json!(key))), Some(told + 1))
                }
                (Step::Close, Some(0)) => (CallPiece::Arguments("{}".into()), None),
                (_, _) => (CallPiece::Arguments("}".into()), None),
            };
            pieces.push(piece);
            inside = next;
        }
        self.pythonic = Some(inside);
        pieces
    }

    /// Whether the text read so far leaves a call open: its arguments begun and not closed.
    pub fn in_a_call(&self) -> bool {
        match self.pythonic {
            Some(inside) => inside.is_some(),
            None => self.arguments.is_some(),
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
            if !self.strings.outside(c) {
                continue;
            }
            match c {
                '{' | '[' => self.braces += 1,
                '}' | ']' => {
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn gemma_s_calls_are_told_argument_by_argument_as_json() {
        let text = "[get_weather(city=\"Paris\", days=[1, 2]), get_time()]";
        let mut scanner = CallScanner::new(ToolFormat::Gemma);
        let mut calls: Vec<(String, String)> = Vec::new();
        for end in 1..=text.len() {
            for piece in scanner.feed(&text[..end]) {
                match piece {
                    CallPiece::Begin { name } => calls.push((name, String::new())),
                    CallPiece::Arguments(more) => calls.last_mut().expect("a call began").1.push_str(&more),
                }
            }
        }
        let arguments: Vec<serde_json::Value> =
            calls.iter().map(|(_, a)| serde_json::from_str(a).expect("JSON")).collect();
        assert_eq!(calls[0].0, "get_weather");
        assert_eq!(arguments, [json!({"city": "Paris", "days": [1, 2]}), json!({})]);
    }

    #[test]
    fn a_call_cut_inside_its_arguments_is_left_open_and_one_cut_after_them_is_not() {
        let open = |format: ToolFormat, text: &str| {
            let mut scanner = CallScanner::new(format);
            scanner.feed(text);
            scanner.in_a_call()
        };
        let hermes = "<tool_call>\n{\"name\":\"f\",\"arguments\":{\"a\":{\"b\":1}}}\n</tool_call>";
        for (cut, left_open) in [(10, false), (38, true), (45, true), (50, false), (hermes.len(), false)] {
            assert_eq!(open(ToolFormat::Hermes, &hermes[..cut]), left_open, "{:?}", &hermes[..cut]);
        }
        let gemma = "[f(a=1, b=\"x\"), g()]";
        for (cut, left_open) in [(1, false), (3, true), (9, true), (14, false), (gemma.len(), false)] {
            assert_eq!(open(ToolFormat::Gemma, &gemma[..cut]), left_open, "{:?}", &gemma[..cut]);
        }
    }
}
