//! Training pairs of prompt text and output length. From an LMSYS trace record (the form of
//! `lmsys_llama_05.jsonl`): `SynthesizedBody` holds the prompt as a Python dict literal
//! (`{'content': '…', 'role': 'user'}`), `GeneratedTokens` the length of the model's answer,
//! `RequestID` identifies the conversation. The split is by conversation (a hash of its id), so
//! no conversation is in two splits.

use std::path::Path;

use crate::EngineError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Example {
    pub conversation: String,
    pub prompt: String,
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
    let hash = conversation
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    match hash % 10 {
        8 => Split::Validation,
        9 => Split::Test,
        _ => Split::Train,
    }
}

/// Token ids cut to their last `max_len` tokens (§3.1: "keep the last 512"), keeping the
/// leading `[CLS]` and trailing `[SEP]` of an encoded sequence.
pub fn keep_last(ids: &[u32], max_len: usize) -> Vec<u32> {
    if ids.len() <= max_len || max_len < 2 || ids.len() < 2 {
        return ids.to_vec();
    }
    let body = &ids[1..ids.len() - 1];
    let mut out = vec![ids[0]];
    out.extend_from_slice(&body[body.len() - (max_len - 2)..]);
    out.push(ids[ids.len() - 1]);
    out
}

/// Reads an LMSYS-form JSONL trace.
pub fn load_lmsys(path: &Path) -> Result<Vec<Example>, EngineError> {
    let bad = |detail: String| EngineError::Load(format!("{}: {detail}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, line)| {
            let row: serde_json::Value =
                serde_json::from_str(line).map_err(|e| bad(format!("line {}: {e}", i + 1)))?;
            let field = |name: &str| row.get(name).ok_or_else(|| bad(format!("line {}: no {name}", i + 1)));
            let body = field("SynthesizedBody")?.as_str().unwrap_or_default();
            let prompt = python_dict_string(body, "content")
                .ok_or_else(|| bad(format!("line {}: no content", i + 1)))?;
            let output_len = field("GeneratedTokens")?.as_u64().unwrap_or(0) as u32;
            let conversation = field("RequestID")?.as_str().unwrap_or_default().to_string();
            Ok(Example { conversation, prompt, output_len })
        })
        .collect()
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
    fn keeps_the_last_tokens_between_cls_and_sep() {
        assert_eq!(keep_last(&[101, 1, 2, 3, 4, 102], 4), vec![101, 3, 4, 102]);
        assert_eq!(keep_last(&[101, 1, 102], 4), vec![101, 1, 102]);
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
