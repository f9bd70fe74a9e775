//! The grammar of an answer free to be text or calls (`tool_choice: "auto"`) when a tool is
//! strict: text that opens no call, or such text and then calls of the offered tools, each
//! call's arguments valid against its tool's schema. A call's opening (where the readers see a
//! call open: Hermes' `<tool_call>`, Mistral's `[TOOL_CALLS]`, Gemma's `[name(`, Llama 3's
//! leading `{` or `<|python_tag|>`) is written only where the grammar goes on into the call, so
//! no call escapes it.

use super::{HERMES_OPEN, MISTRAL_OPEN, Tool, ToolFormat, lark_literal, pythonic};
use crate::grammar::GrammarSource;

/// Any character, newlines included.
const ANY: &str = "(?s:.)";

/// Where a format's calls open in free text, and the grammar of what follows the opening.
pub(super) struct Opening {
    /// A regex of the opening, as the readers find it.
    pub marker: String,
    /// The opening as a call-only answer writes it.
    pub literal: String,
    /// The rule of the rest: the calls after the opening, and nothing after them.
    pub rest: String,
}

impl ToolFormat {
    /// A grammar for an answer that is text (maybe none), or text and then calls of `tools`
    /// (several where `parallel`), each call's arguments valid against its tool's schema; the
    /// text opens no call of its own.
    pub fn auto_grammar(self, tools: &[Tool], parallel: bool) -> GrammarSource {
        let call_rule = self.call_rule(tools);
        if self == Self::Llama3 {
            // Llama 3's call is the whole answer: text is anything that does not open as one.
            let text = format!(r"TEXT: /{ANY}+/ & ~/\s*(\{{|<\|python_tag\|>){ANY}*/");
            return GrammarSource::Lark(format!("start: TEXT? | call\n{text}\n{call_rule}\n"));
        }
        let openings = self.openings(tools, parallel);
        let markers = openings.iter().map(|o| o.marker.as_str()).collect::<Vec<_>>().join("|");
        // The text holds no opening; an opening lexeme is text ending at its first opening.
        let mut lexemes = vec![format!("TEXT: /{ANY}+/ & ~/{ANY}*({markers}){ANY}*/")];
        let mut alternatives = vec!["TEXT?".to_string()];
        for (i, opening) in openings.iter().enumerate() {
            lexemes.push(format!("OPEN_{i}: /{ANY}*({})/ & ~/{ANY}*({markers}){ANY}+/", opening.marker));
            alternatives.push(format!("OPEN_{i} {}", opening.rest));
        }
        GrammarSource::Lark(format!(
            "start: {}\n{}\n{call_rule}\n",
            alternatives.join("\n    | "),
            lexemes.join("\n")
        ))
    }

    /// Where this format's calls open in text (Llama 3's only at the start: not here).
    pub(super) fn openings(self, tools: &[Tool], parallel: bool) -> Vec<Opening> {
        let more = |separator: &str, call: &str| match parallel {
            true => format!(" ({separator} {call})*"),
            false => String::new(),
        };
        match self {
            Self::Hermes => {
                let block = r#""\n" call "\n</tool_call>""#;
                vec![Opening {
                    marker: regex_literal(HERMES_OPEN),
                    literal: lark_literal(HERMES_OPEN),
                    rest: format!("{block}{}", more(&lark_literal(&format!("\n{HERMES_OPEN}")), block)),
                }]
            }
            Self::Mistral => vec![Opening {
                marker: regex_literal(MISTRAL_OPEN),
                literal: lark_literal(MISTRAL_OPEN),
                rest: format!(r#""[" call{} "]""#, more(r#"",""#, "call")),
            }],
            // A list of calls opens at `[`, an offered tool's name and `(`, spaces allowed
            // between them as the reader allows them; it may stand in a `tool_code` block,
            // which the answer may then close.
            Self::Gemma => tools
                .iter()
                .map(|tool| Opening {
                    marker: format!(r"\[\s*{}\s*\(", regex_literal(&tool.name)),
                    literal: lark_literal(&format!("[{}(", tool.name)),
                    rest: format!(
                        r#"{} ")"{} "]" {}?"#,
                        pythonic::keywords(tool),
                        more(r#"", ""#, "call"),
                        lark_literal(&format!("\n{}", pythonic::FENCE_END))
                    ),
                })
                .collect(),
            Self::Llama3 => Vec::new(),
        }
    }
}

/// `text` as a regex that matches it alone.
fn regex_literal(text: &str) -> String {
    text.chars().fold(String::new(), |mut regex, c| {
        if r"\.+*?()|[]{}^$#&-~/".contains(c) {
            regex.push('\\');
        }
        regex.push(c);
        regex
    })
}
