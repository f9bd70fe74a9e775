//! Training pairs of prompt text and output length, from two sources:
//! - an LMSYS trace record (the form of `lmsys_llama_05.jsonl`): `SynthesizedBody` holds the
//!   prompt as a Python dict literal (`{'content': '…', 'role': 'user'}`), `GeneratedTokens` the
//!   length of the model's answer, `RequestID` identifies the conversation;
//! - a round of a ShareGPT conversation with the length of the served model's own answer, as
//!   `morph train lengths` records it ([`LengthRecord`]); the predictor's input for round k is
//!   the earlier prompts and responses followed by the current prompt (§3.1).
//!
//! The split is by conversation (a hash of its id), so no conversation is in two splits.

use std::collections::HashMap;
use std::path::Path;

use morph_encoder::predictor::predictor_text;
use serde::{Deserialize, Serialize};

use morph_decoder::Message;
use morph_engine::EngineError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Example {
    /// Where it came from: `lmsys` or `sharegpt`.
    pub source: &'static str,
    pub conversation: String,
    /// 1 for a conversation's first prompt.
    pub round: u32,
    pub prompt: String,
    /// The generating model's prompt tokens.
    pub input_len: u32,
    pub output_len: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    Train,
    Validation,
    Test,
}

/// 80% train, 10% validation, 10% test, by an FNV-1a hash of the conversation id.
pub fn split_of(conversation: &str) -> Split {
    match fnv1a(conversation) % 10 {
        8 => Split::Validation,
        9 => Split::Test,
        _ => Split::Train,
    }
}

/// Which conversations' rounds a run uses, by [`split_of`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rounds {
    /// The validation and test splits, which the predictor never saw.
    Heldout,
    /// The training split only (what the predictor learns from).
    Train,
    All,
}

impl Rounds {
    pub fn includes(self, conversation: &str) -> bool {
        match self {
            Rounds::All => true,
            Rounds::Heldout => split_of(conversation) != Split::Train,
            Rounds::Train => split_of(conversation) == Split::Train,
        }
    }
}

impl std::str::FromStr for Rounds {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "heldout" => Ok(Rounds::Heldout),
            "train" => Ok(Rounds::Train),
            "all" => Ok(Rounds::All),
            other => Err(format!("'{other}' is not heldout, train or all")),
        }
    }
}

fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

/// Reads an LMSYS-form JSONL trace.
pub fn load_lmsys(path: &Path) -> Result<Vec<Example>, EngineError> {
    let bad = |detail: String| EngineError::Load(format!("{}: {detail}", path.display()));
    read_jsonl::<serde_json::Value>(path)?
        .into_iter()
        .enumerate()
        .map(|(i, row)| {
            let field = |name: &str| row.get(name).ok_or_else(|| bad(format!("line {}: no {name}", i + 1)));
            let body = field("SynthesizedBody")?.as_str().unwrap_or_default();
            let prompt = python_dict_string(body, "content")
                .ok_or_else(|| bad(format!("line {}: no content", i + 1)))?;
            let output_len = field("GeneratedTokens")?.as_u64().unwrap_or(0) as u32;
            let input_len = field("ContextTokens")?.as_u64().unwrap_or(0) as u32;
            let conversation = field("RequestID")?.as_str().unwrap_or_default().to_string();
            Ok(Example { source: "lmsys", conversation, round: 1, prompt, input_len, output_len })
        })
        .collect()
}

/// A ShareGPT conversation: alternating user and assistant turns, starting with the user.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Conversation {
    pub id: String,
    pub turns: Vec<Message>,
}

impl Conversation {
    /// How many user prompts it has.
    pub fn rounds(&self) -> u32 {
        self.turns.iter().filter(|t| t.role == "user").count() as u32
    }

    /// The turns before round `round` (1-based) and that round's prompt.
    pub fn round(&self, round: u32) -> Option<(&[Message], &str)> {
        let at = 2 * (round as usize).checked_sub(1)?;
        let prompt = self.turns.get(at).filter(|t| t.role == "user")?;
        Some((&self.turns[..at], &prompt.content))
    }

    /// The round this conversation contributes to a dataset of one round per conversation: a
    /// hash of its id over its rounds, so every round number is represented.
    pub fn sampled_round(&self) -> u32 {
        1 + (fnv1a(&self.id) % u64::from(self.rounds().max(1))) as u32
    }
}

/// Reads a ShareGPT JSONL file (`{"id", "turns": [{"role", "content"}, …]}` a line).
pub fn load_sharegpt(path: &Path) -> Result<Vec<Conversation>, EngineError> {
    read_jsonl(path)
}

/// One `T` per non-empty line of a JSONL file.
fn read_jsonl<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Vec<T>, EngineError> {
    let bad = |detail: String| EngineError::Load(format!("{}: {detail}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, line)| serde_json::from_str(line).map_err(|e| bad(format!("line {}: {e}", i + 1))))
        .collect()
}

/// The served model's answer to one round of a ShareGPT conversation, as `morph train lengths`
/// writes it (a JSONL line each); the prompt text stays in the ShareGPT file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LengthRecord {
    pub conversation: String,
    pub round: u32,
    /// The first of the round's earlier turns the decoder saw: older ones were dropped, in
    /// prompt-and-response pairs, to fit its context cap.
    pub first_turn: u32,
    /// The decoder's prompt tokens (chat template included, after dropping the oldest turns
    /// that did not fit the context cap).
    pub prompt_tokens: u32,
    pub output_len: u32,
    /// "stop" (end of sequence) or "length" (cut at max_tokens).
    pub finish: String,
}

/// Reads recorded lengths.
pub fn load_length_records(path: &Path) -> Result<Vec<LengthRecord>, EngineError> {
    read_jsonl(path)
}

/// The turns each record's decoder saw, in record order: the round's earlier turns from
/// `first_turn` on, and its prompt.
pub fn recorded_turns<'a>(
    conversations: &'a [Conversation],
    records: &[LengthRecord],
) -> Result<Vec<(&'a [Message], &'a str)>, EngineError> {
    let by_id: HashMap<&str, &Conversation> = conversations.iter().map(|c| (c.id.as_str(), c)).collect();
    records
        .iter()
        .map(|r| {
            by_id
                .get(r.conversation.as_str())
                .and_then(|c| c.round(r.round))
                .and_then(|(history, prompt)| Some((history.get(r.first_turn as usize..)?, prompt)))
                .ok_or_else(|| {
                    EngineError::Load(format!(
                        "no round {} of conversation {} in ShareGPT",
                        r.round, r.conversation
                    ))
                })
        })
        .collect()
}

/// Examples from recorded lengths, their prompts taken from the ShareGPT conversations.
pub fn sharegpt_examples(
    conversations: &[Conversation],
    records: &[LengthRecord],
) -> Result<Vec<Example>, EngineError> {
    let turns = recorded_turns(conversations, records)?;
    Ok(records
        .iter()
        .zip(turns)
        .map(|(r, (history, prompt))| Example {
            source: "sharegpt",
            conversation: r.conversation.clone(),
            round: r.round,
            prompt: predictor_text(history.iter().map(|m| m.content.as_str()), prompt),
            input_len: r.prompt_tokens,
            output_len: r.output_len,
        })
        .collect())
}

/// The string value of `key` in a Python dict literal, escapes decoded.
fn python_dict_string(dict: &str, key: &str) -> Option<String> {
    let start = dict.find(&format!("'{key}': "))? + key.len() + 4;
    let mut chars = dict[start..].chars();
    let quote = chars.next().filter(|c| *c == '\'' || *c == '"')?;
    let mut out = String::new();
    while let Some(c) = chars.next() {
        match c {
            c if c == quote => return Some(out),
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                'x' => out.push(hex_char(&mut chars, 2)?),
                'u' => out.push(hex_char(&mut chars, 4)?),
                'U' => out.push(hex_char(&mut chars, 8)?),
                other => out.push(other),
            },
            c => out.push(c),
        }
    }
    None
}

fn hex_char(chars: &mut std::str::Chars<'_>, digits: usize) -> Option<char> {
    let hex: String = chars.take(digits).collect();
    char::from_u32(u32::from_str_radix(&hex, 16).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_python_dict_strings_with_escapes() {
        let body = r#"{'content': "It's a \"test\"\nline two \xe9\u4e2d", 'role': 'user'}"#;
        assert_eq!(python_dict_string(body, "content").unwrap(), "It's a \"test\"\nline two é中");
        assert_eq!(python_dict_string("{'content': 'a\\'b', 'role': 'user'}", "content").unwrap(), "a'b");
        assert_eq!(python_dict_string("{'role': 'user'}", "content"), None);
    }

    #[test]
    fn rounds_of_a_conversation_and_their_predictor_input() {
        let line = r#"{"id": "c1", "turns": [{"role": "user", "content": "A?"}, {"role": "assistant", "content": "a."}, {"role": "user", "content": "B?"}]}"#;
        let c: Conversation = serde_json::from_str(line).unwrap();
        assert_eq!(c.rounds(), 2);
        let (history, prompt) = c.round(2).unwrap();
        assert_eq!((history.len(), prompt), (2, "B?"));
        assert_eq!(predictor_text(history.iter().map(|m| m.content.as_str()), prompt), "A?\na.\nB?");
        assert_eq!(c.round(1).unwrap().0.len(), 0);
        assert!(c.round(3).is_none() && c.round(0).is_none());
        assert!((1..=2).contains(&c.sampled_round()));
        let record = LengthRecord {
            conversation: "c1".into(),
            round: 2,
            first_turn: 0,
            prompt_tokens: 40,
            output_len: 7,
            finish: "stop".into(),
        };
        let examples = sharegpt_examples(std::slice::from_ref(&c), std::slice::from_ref(&record)).unwrap();
        assert_eq!(
            (examples[0].round, examples[0].output_len, examples[0].prompt.as_str()),
            (2, 7, "A?\na.\nB?")
        );
        let later = LengthRecord { first_turn: 2, ..record.clone() };
        assert_eq!(sharegpt_examples(std::slice::from_ref(&c), &[later]).unwrap()[0].prompt, "B?");
        let missing = LengthRecord { round: 5, ..record };
        assert!(sharegpt_examples(&[c], &[missing]).is_err());
    }

    #[test]
    fn splits_by_conversation_about_80_10_10() {
        let splits: Vec<Split> = (0..1000).map(|i| split_of(&format!("conversation-{i}"))).collect();
        let count = |s| splits.iter().filter(|&&x| x == s).count();
        assert!((700..900).contains(&count(Split::Train)), "{}", count(Split::Train));
        assert!((50..150).contains(&count(Split::Test)));
        assert_eq!(split_of("abc"), split_of("abc"));
    }
}
