//! Gemma's calls: a Python list of calls, `[get_weather(city="Paris"), get_time()]`, bare or in
//! a `tool_code` block (Google's function-calling guide for Gemma prompts for it; vLLM reads it
//! as its `pythonic` format). Arguments are keywords with Python literals (JSON's are read too).

use serde_json::{Map, Value, json};

use super::{Opening, Tool, ToolCall, lark_literal};
use crate::grammar::GrammarSource;

/// The block a Gemma model may put its calls in.
pub(super) const FENCE: &str = "```tool_code";
pub(super) const FENCE_END: &str = "```";

/// Why text is not a call (yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unread {
    /// The text ends inside it.
    Cut,
    /// It is not one.
    Invalid,
}

/// The calls of the first list in `text` that is calls, and the text around it (a `tool_code`
/// block around the list dropped).
pub(super) fn parse(text: &str) -> Option<(Vec<ToolCall>, String)> {
    text.match_indices('[').find_map(|(at, _)| {
        let (calls, len) = list(&text[at..]).ok()?;
        let before = text[..at].trim_end();
        let after = text[at + len..].trim_start();
        let (before, after) = match (before.strip_suffix(FENCE), after.strip_prefix(FENCE_END)) {
            (Some(before), Some(after)) => (before, after),
            _ => (before, after),
        };
        Some((calls, format!("{} {}", before.trim(), after.trim()).trim().to_string()))
    })
}

/// Whether a list of calls opens at the start of `rest`: `[`, spaces, a name and `(`.
pub(super) fn opens(rest: &str) -> Opening {
    let Some(inside) = rest.strip_prefix('[') else { return Opening::No };
    let mut cursor = Cursor::new(inside);
    cursor.spaces();
    match cursor.name().and_then(|_| cursor.eat('(')) {
        Ok(()) => Opening::Yes,
        Err(Unread::Cut) => Opening::Maybe,
        Err(Unread::Invalid) => Opening::No,
    }
}

/// A list of calls at the start of `text`: them and the bytes the list takes.
pub(super) fn list(text: &str) -> Result<(Vec<ToolCall>, usize), Unread> {
    let mut cursor = Cursor::new(text);
    cursor.eat('[')?;
    let mut calls = Vec::new();
    loop {
        cursor.spaces();
        calls.push(cursor.call()?);
        cursor.spaces();
        if cursor.eat(',').is_err() {
            cursor.eat(']')?;
            return Ok((calls, cursor.at));
        }
    }
}

/// A piece of a list of calls, as a stream reads it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Step {
    /// A call of this tool opens (`name(`).
    Open(String),
    /// One of its arguments, whole.
    Keyword(String, Value),
    /// It closes.
    Close,
}

/// The next piece at the start of `text`, `inside` a call or not (the list's `[`, commas and
/// spaces before it skipped), and the bytes read to its end.
pub(super) fn step(text: &str, inside: bool) -> Result<(Step, usize), Unread> {
    let mut cursor = Cursor::new(text);
    let separators = |c: char| c == '[' || c == ',' || c.is_whitespace();
    while let Some(c) = cursor.peek().filter(|&c| separators(c)) {
        cursor.at += c.len_utf8();
    }
    let step = if !inside {
        let name = cursor.name()?.to_string();
        cursor.spaces();
        cursor.eat('(')?;
        Step::Open(name)
    } else if cursor.eat(')').is_ok() {
        Step::Close
    } else {
        let key = cursor.name()?.to_string();
        cursor.spaces();
        cursor.eat('=')?;
        cursor.spaces();
        Step::Keyword(key, cursor.value()?)
    };
    Ok((step, cursor.at))
}

/// `call` as Gemma writes it: `name(key=value, …)`, each value as JSON writes it.
pub(super) fn written(name: &str, arguments: &Value) -> String {
    let keywords: Vec<String> = match arguments {
        Value::Object(map) => map.iter().map(|(key, value)| format!("{key}={value}")).collect(),
        _ => Vec::new(),
    };
    format!("{name}({})", keywords.join(", "))
}

/// A grammar for a list of calls of `tools` (one, or several where `parallel`), each tool's
/// every property given (which is valid against its schema) in the schema's order, each value
/// as JSON valid against the property's schema.
pub(super) fn grammar(tools: &[Tool], parallel: bool) -> GrammarSource {
    let start = if parallel { r#"start: "[" call (", " call)* "]""# } else { r#"start: "[" call "]""# };
    GrammarSource::Lark(format!("{start}\n{}\n", call_rule(tools)))
}

/// The grammar's `call` rule: a call of any of `tools`.
pub(super) fn call_rule(tools: &[Tool]) -> String {
    let calls: Vec<String> = tools
        .iter()
        .map(|tool| format!("{} {} \")\"", lark_literal(&format!("{}(", tool.name)), keywords(tool)))
        .collect();
    format!("call: {}", calls.join("\n    | "))
}

/// The grammar of a call's keywords, between its parentheses: every property of `tool`'s
/// schema, in its order, each value as JSON valid against the property's schema (nothing where
/// it has none).
pub(super) fn keywords(tool: &Tool) -> String {
    let defs = shared_definitions(&tool.parameters);
    let properties = tool.parameters.get("properties").and_then(Value::as_object);
    let keywords: Vec<String> = properties
        .into_iter()
        .flatten()
        .map(|(key, schema)| {
            let mut schema = schema.clone();
            if let (Some(object), Some(defs)) = (schema.as_object_mut(), &defs) {
                object.extend(defs.clone());
            }
            format!("{} %json {}", lark_literal(&format!("{key}=")), GrammarSource::json_in_lark(&schema))
        })
        .collect();
    keywords.join(" \", \" ")
}

/// The definitions a schema's properties may refer to (`$defs`, `definitions`), to go with each.
fn shared_definitions(schema: &Value) -> Option<Map<String, Value>> {
    let object = schema.as_object()?;
    let defs: Map<String, Value> = ["$defs", "definitions"]
        .into_iter()
        .filter_map(|key| Some((key.to_string(), object.get(key)?.clone())))
        .collect();
    (!defs.is_empty()).then_some(defs)
}

/// Reads Python's call syntax from a place in a text.
struct Cursor<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Cursor<'a> {
    fn new(text: &'a str) -> Self {
        Self { text, at: 0 }
    }

    fn peek(&self) -> Option<char> {
        self.text[self.at..].chars().next()
    }

    fn spaces(&mut self) {
        while let Some(c) = self.peek().filter(|c| c.is_whitespace()) {
            self.at += c.len_utf8();
        }
    }

    /// `c` next: taken.
    fn eat(&mut self, c: char) -> Result<(), Unread> {
        match self.peek() {
            None => Err(Unread::Cut),
            Some(next) if next == c => {
                self.at += c.len_utf8();
                Ok(())
            }
            Some(_) => Err(Unread::Invalid),
        }
    }

    /// A run of characters `part` takes (at least one), which the text must not end in.
    fn run(&mut self, part: impl Fn(char) -> bool) -> Result<&'a str, Unread> {
        let start = self.at;
        while let Some(c) = self.peek().filter(|&c| part(c)) {
            self.at += c.len_utf8();
        }
        match (self.at == start, self.peek()) {
            (_, None) => Err(Unread::Cut),
            (true, Some(_)) => Err(Unread::Invalid),
            (false, Some(_)) => Ok(&self.text[start..self.at]),
        }
    }

    /// A function's or keyword's name (dots allowed, as in `module.function`).
    fn name(&mut self) -> Result<&'a str, Unread> {
        if self.peek().is_some_and(|c| c.is_ascii_digit()) {
            return Err(Unread::Invalid);
        }
        self.run(|c| c.is_alphanumeric() || c == '_' || c == '.')
    }

    /// `name(key=value, …)`.
    fn call(&mut self) -> Result<ToolCall, Unread> {
        let name = self.name()?.to_string();
        self.spaces();
        self.eat('(')?;
        let mut arguments = Map::new();
        loop {
            self.spaces();
            if self.eat(')').is_ok() {
                return Ok(ToolCall { name, arguments: Value::Object(arguments) });
            }
            let key = self.name()?.to_string();
            self.spaces();
            self.eat('=')?;
            self.spaces();
            arguments.insert(key, self.value()?);
            self.spaces();
            if self.eat(',').is_err() {
                self.eat(')')?;
                return Ok(ToolCall { name, arguments: Value::Object(arguments) });
            }
        }
    }

    /// A Python (or JSON) literal: a string, number, `True`/`False`/`None`, list or dict.
    fn value(&mut self) -> Result<Value, Unread> {
        match self.peek().ok_or(Unread::Cut)? {
            quote @ ('"' | '\'') => self.string(quote).map(Value::String),
            '[' => self.items('[', ']', Self::value).map(Value::Array),
            '{' => {
                self.items('{', '}', Self::entry).map(|entries| Value::Object(entries.into_iter().collect()))
            }
            c if c == '-' || c.is_ascii_digit() => {
                let digits = self.run(|c| c.is_ascii_digit() || "+-.eE".contains(c))?;
                serde_json::from_str::<serde_json::Number>(digits)
                    .map(Value::Number)
                    .map_err(|_| Unread::Invalid)
            }
            _ => match self.run(char::is_alphabetic)? {
                "True" | "true" => Ok(json!(true)),
                "False" | "false" => Ok(json!(false)),
                "None" | "null" => Ok(Value::Null),
                _ => Err(Unread::Invalid),
            },
        }
    }

    /// `key: value` in a dict.
    fn entry(&mut self) -> Result<(String, Value), Unread> {
        let key = self.string(self.peek().ok_or(Unread::Cut)?)?;
        self.spaces();
        self.eat(':')?;
        self.spaces();
        Ok((key, self.value()?))
    }

    /// Items between `open` and `close`, separated by commas (a last comma allowed).
    fn items<T>(
        &mut self,
        open: char,
        close: char,
        item: impl Fn(&mut Self) -> Result<T, Unread>,
    ) -> Result<Vec<T>, Unread> {
        self.eat(open)?;
        let mut items = Vec::new();
        loop {
            self.spaces();
            if self.eat(close).is_ok() {
                return Ok(items);
            }
            items.push(item(self)?);
            self.spaces();
            if self.eat(',').is_err() {
                self.eat(close)?;
                return Ok(items);
            }
        }
    }

    /// A string in `quote`s, Python's escapes read.
    fn string(&mut self, quote: char) -> Result<String, Unread> {
        if quote != '"' && quote != '\'' {
            return Err(Unread::Invalid);
        }
        self.eat(quote)?;
        let mut out = String::new();
        let mut chars = self.text[self.at..].char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                c if c == quote => {
                    self.at += i + 1;
                    return Ok(out);
                }
                '\\' => {
                    let (_, escaped) = chars.next().ok_or(Unread::Cut)?;
                    match escaped {
                        'n' => out.push('\n'),
                        't' => out.push('\t'),
                        'r' => out.push('\r'),
                        'u' => {
                            let hex: String = chars.by_ref().take(4).map(|(_, c)| c).collect();
                            let code = u32::from_str_radix(&hex, 16).map_err(|_| Unread::Cut)?;
                            out.push(char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER));
                        }
                        other => out.push(other),
                    }
                }
                c => out.push(c),
            }
        }
        Err(Unread::Cut)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_calls_are_read_with_python_and_json_literals() {
        let text = "```tool_code\n[get_weather(city='Paris', days=3, units=None), plan(stops=[\"a\", 'b'], fast=True, opts={'x': 1.5})]\n```";
        let (calls, rest) = parse(text).expect("two calls");
        assert_eq!(rest, "");
        assert_eq!(
            calls[0],
            ToolCall {
                name: "get_weather".into(),
                arguments: json!({"city": "Paris", "days": 3, "units": null})
            }
        );
        assert_eq!(calls[1].arguments, json!({"stops": ["a", "b"], "fast": true, "opts": {"x": 1.5}}));
        let (calls, rest) = parse("Checking. [get_time()] Done.").expect("a call");
        assert_eq!((calls[0].name.as_str(), rest.as_str()), ("get_time", "Checking. Done."));
        for text in ["[1, 2]", "[get_time(", "[a b]", "no list", "[f(x=)]"] {
            assert!(parse(text).is_none(), "{text}");
        }
    }

    #[test]
    fn an_opening_is_told_from_a_list_that_is_not_calls() {
        assert_eq!(opens("[get_weather(city"), Opening::Yes);
        assert_eq!(opens("[ get_wea"), Opening::Maybe);
        assert_eq!(opens("["), Opening::Maybe);
        assert_eq!(opens("[1, 2]"), Opening::No);
        assert_eq!(opens("[see above]"), Opening::No);
    }

    #[test]
    fn a_stream_reads_a_call_piece_by_piece_and_waits_where_a_piece_is_cut() {
        assert_eq!(step("[get_weather(city", false), Ok((Step::Open("get_weather".into()), 13)));
        assert_eq!(step("city=\"Par", true), Err(Unread::Cut));
        assert_eq!(step("days=3", true), Err(Unread::Cut));
        assert_eq!(step(", days=3)", true), Ok((Step::Keyword("days".into(), json!(3)), 8)));
        assert_eq!(step(")]", true), Ok((Step::Close, 1)));
        assert_eq!(step("city Paris", true), Err(Unread::Invalid));
        // Spaces outside ASCII are stepped over whole.
        assert_eq!(step("\u{a0}f(", false), Ok((Step::Open("f".into()), 4)));
        assert!(parse("[f(a=\u{3000}1)]").is_some());
        assert_eq!(written("f", &json!({"a": 1, "b": "x"})), "f(a=1, b=\"x\")");
    }

    #[test]
    fn the_grammar_writes_every_property_as_a_keyword() {
        let tool = Tool {
            name: "get_weather".into(),
            description: None,
            parameters: json!({"type": "object", "properties": {"city": {"$ref": "#/$defs/city"}, "days": {"type": "integer"}}, "$defs": {"city": {"type": "string"}}}),
            strict: false,
        };
        let GrammarSource::Lark(lark) = grammar(&[tool], true) else { panic!("lark") };
        assert!(lark.starts_with("start: \"[\" call (\", \" call)* \"]\"\n"), "{lark}");
        assert!(lark.contains(r#""get_weather(" "city=" %json {"#), "{lark}");
        assert!(lark.contains(r#""$defs":{"city""#), "{lark}");
        assert!(lark.contains(r#"", " "days=" %json"#), "{lark}");
    }
}
