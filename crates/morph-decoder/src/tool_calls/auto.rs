//! An answer free to be text or calls (`tool_choice: auto`), read as it grows: text before any
//! call goes out at once; from where a call may open the text is held, each of Hermes' blocks
//! is told as soon as it closes, and the rest is read at the end. Only calls of the tools
//! offered count; anything else stays text.

use super::{HERMES_CLOSE, HERMES_OPEN, ToolCall, ToolFormat, hermes_block, hermes_close};

/// What a free answer's text has shown so far.
#[derive(Debug, Clone, PartialEq)]
pub enum AutoPiece {
    /// Text of the answer.
    Text(String),
    /// A whole call of an offered tool.
    Call(ToolCall),
}

/// Reads a free answer as its text grows: [`AutoReader::feed`] the text so far after each
/// token, [`AutoReader::finish`] the whole text at the end.
#[derive(Debug, Clone)]
pub struct AutoReader {
    format: ToolFormat,
    /// The tools offered.
    names: Vec<String>,
    /// Bytes of the text told (as text or calls) so far.
    told: usize,
    /// Whether a call has surely opened (from there on the text is held).
    holding: bool,
    /// Text inside the held part that is not a call, told at the end.
    kept: String,
}

impl AutoReader {
    pub fn new(format: ToolFormat, names: Vec<String>) -> Self {
        Self { format, names, told: 0, holding: false, kept: String::new() }
    }

    /// What `text` (the whole text so far) shows beyond what was told.
    pub fn feed(&mut self, text: &str) -> Vec<AutoPiece> {
        let mut pieces = Vec::new();
        if !self.holding {
            let (until, opened) = match self.format.call_opening(text, self.told) {
                Some((at, sure)) => (at, sure),
                None => (text.len(), false),
            };
            push_text(&mut pieces, &text[self.told..until]);
            self.told = until;
            self.holding = opened;
        }
        if self.holding && self.format == ToolFormat::Hermes {
            while let Some((before, inside, end)) = closed_block(&text[self.told..]) {
                match hermes_block(inside).filter(|c| self.offered(c)) {
                    Some(call) => {
                        self.kept.push_str(before);
                        pieces.push(AutoPiece::Call(call));
                    }
                    None => self.kept.push_str(&text[self.told..self.told + end]),
                }
                self.told += end;
            }
        }
        pieces
    }

    /// The rest of the answer, once `text` is whole: the calls left in it where they are all of
    /// offered tools, and every piece of text not told yet.
    pub fn finish(&mut self, text: &str) -> Vec<AutoPiece> {
        let rest = &text[self.told.min(text.len())..];
        self.told = text.len();
        let mut kept = std::mem::take(&mut self.kept);
        let mut pieces = Vec::new();
        match self.format.parse(rest).filter(|(calls, _)| calls.iter().all(|c| self.offered(c))) {
            Some((calls, outside)) => {
                kept.push_str(&outside);
                push_text(&mut pieces, &kept);
                pieces.extend(calls.into_iter().map(AutoPiece::Call));
            }
            None => {
                kept.push_str(rest);
                push_text(&mut pieces, &kept);
            }
        }
        pieces
    }

    fn offered(&self, call: &ToolCall) -> bool {
        self.names.contains(&call.name)
    }
}

fn push_text(pieces: &mut Vec<AutoPiece>, text: &str) {
    if !text.is_empty() {
        pieces.push(AutoPiece::Text(text.to_string()));
    }
}

/// The first closed Hermes block in `text`: the text before it, what is inside, and where it
/// ends (a tag inside one of its call's strings does not close it).
fn closed_block(text: &str) -> Option<(&str, &str, usize)> {
    let open = text.find(HERMES_OPEN)?;
    let inside_at = open + HERMES_OPEN.len();
    let close = hermes_close(&text[inside_at..])? + inside_at;
    Some((&text[..open], &text[inside_at..close], close + HERMES_CLOSE.len()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Every piece `reader` tells of `text`, fed a few bytes at a time, as tokens arrive.
    fn read(mut reader: AutoReader, text: &str) -> Vec<Vec<AutoPiece>> {
        let ends = (1..=text.len()).filter(|&e| text.is_char_boundary(e)).step_by(3).chain([text.len()]);
        let mut told: Vec<Vec<AutoPiece>> = ends.map(|end| reader.feed(&text[..end])).collect();
        told.push(reader.finish(text));
        told
    }

    fn reader(format: ToolFormat) -> AutoReader {
        AutoReader::new(format, vec!["get_weather".into()])
    }

    #[test]
    fn text_goes_out_before_a_call_opens_and_each_block_as_soon_as_it_closes() {
        let text = "Let me <b>look</b>.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call>";
        let told = read(reader(ToolFormat::Hermes), text);
        let first_call = told.iter().position(|p| p.iter().any(|p| matches!(p, AutoPiece::Call(_))));
        assert!(first_call.is_some_and(|at| at < told.len() - 2), "the first call is told before the end");
        let pieces: Vec<AutoPiece> = told.into_iter().flatten().collect();
        assert_eq!(pieces.concat_text(), "Let me <b>look</b>.\n\n");
        let cities: Vec<&str> = pieces
            .iter()
            .filter_map(|p| if let AutoPiece::Call(c) = p { c.arguments["city"].as_str() } else { None })
            .collect();
        assert_eq!(cities, ["Paris", "Oslo"]);
    }

    #[test]
    fn a_block_is_told_when_its_own_tag_closes_it_not_one_inside_an_argument() {
        let text =
            "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"</tool_call>\"}}</tool_call>";
        let pieces: Vec<AutoPiece> = read(reader(ToolFormat::Hermes), text).into_iter().flatten().collect();
        let calls: Vec<&ToolCall> =
            pieces.iter().filter_map(|p| if let AutoPiece::Call(c) = p { Some(c) } else { None }).collect();
        assert_eq!(calls.len(), 1, "{pieces:?}");
        assert_eq!(calls[0].arguments, json!({"city": "</tool_call>"}));
        assert_eq!(pieces.concat_text(), "");
    }

    #[test]
    fn a_call_of_a_tool_not_offered_and_text_of_no_call_stay_text() {
        let stranger = "<tool_call>{\"name\": \"rm\", \"arguments\": {}}</tool_call> ok";
        let pieces: Vec<AutoPiece> =
            read(reader(ToolFormat::Hermes), stranger).into_iter().flatten().collect();
        assert_eq!(pieces.concat_text(), stranger);
        let plain = "It is sunny [see above] and {warm}.";
        for format in [ToolFormat::Hermes, ToolFormat::Gemma, ToolFormat::Mistral, ToolFormat::Llama3] {
            let told = read(reader(format), plain);
            assert_eq!(told.iter().flatten().cloned().collect::<Vec<_>>().concat_text(), plain, "{format:?}");
            assert!(told.last().is_some_and(Vec::is_empty), "{format:?} told it all as it came");
        }
    }

    #[test]
    fn the_one_call_formats_are_read_at_the_end() {
        let llama = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Lima\"}}";
        let gemma = "```tool_code\n[get_weather(city=\"Lima\")]\n```";
        for (format, text) in [(ToolFormat::Llama3, llama), (ToolFormat::Gemma, gemma)] {
            let told = read(reader(format), text);
            assert!(told[..told.len() - 1].iter().all(Vec::is_empty), "{format:?} holds its call");
            let expected = ToolCall { name: "get_weather".into(), arguments: json!({"city": "Lima"}) };
            assert_eq!(told.last(), Some(&vec![AutoPiece::Call(expected)]), "{format:?}");
        }
    }

    trait Text {
        fn concat_text(&self) -> String;
    }

    impl Text for Vec<AutoPiece> {
        fn concat_text(&self) -> String {
            self.iter()
                .filter_map(|p| match p {
                    AutoPiece::Text(t) => Some(t.as_str()),
                    _ => None,
                })
                .collect()
        }
    }
}
