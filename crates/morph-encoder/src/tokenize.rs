//! Text to token ids, with the tokenizer's own padding and truncation turned off.
//!
//! The tokenizer.json shipped with sentence-transformers models pads and truncates to 128:
//! padding would silently corrupt mean pooling (pad tokens counted as content) and truncation
//! would hide oversize inputs. Morph pads per runtime with an attention mask and truncates only
//! when a request asks for it.

use std::path::Path;

use morph_engine::EngineError;

#[derive(Debug, Clone)]
pub struct TextTokenizer {
    inner: tokenizers::Tokenizer,
}

impl TextTokenizer {
    pub fn load(path: &Path) -> Result<Self, EngineError> {
        let mut inner = tokenizers::Tokenizer::from_file(path)
            .map_err(|e| EngineError::Load(format!("tokenizer {}: {e}", path.display())))?;
        inner.with_padding(None);
        inner
            .with_truncation(None)
            .map_err(|e| EngineError::Load(format!("tokenizer {}: {e}", path.display())))?;
        Ok(Self { inner })
    }

    /// Token ids with the model's special tokens (`[CLS] ... [SEP]` for BERT).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, EngineError> {
        self.inner
            .encode(text, true)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| EngineError::Tokenize(e.to_string()))
    }

    /// A pair's ids as the tokenizer's pair template joins them (`[CLS] a [SEP] b [SEP]` for
    /// BERT, `<s> a </s></s> b </s>` for RoBERTa), and each token's type (segment) id.
    pub fn encode_pair(&self, first: &str, second: &str) -> Result<(Vec<u32>, Vec<u32>), EngineError> {
        self.inner
            .encode((first, second), true)
            .map(|e| (e.get_ids().to_vec(), e.get_type_ids().to_vec()))
            .map_err(|e| EngineError::Tokenize(e.to_string()))
    }
}

/// One token of a text as text-embeddings-inference's `/tokenize` shows it: its id, its text
/// (the input's own characters, or the special token's name), and where it lies in the input
/// (byte offsets; none for a special token).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TokenSpan {
    pub id: u32,
    pub text: String,
    pub special: bool,
    pub start: Option<usize>,
    pub stop: Option<usize>,
}

impl TextTokenizer {
    /// Tokens in the vocabulary, special ones included: every id is below it.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// `text`'s tokens, with the model's special tokens when `add_special`.
    pub fn spans(&self, text: &str, add_special: bool) -> Result<Vec<TokenSpan>, EngineError> {
        let encoding =
            self.inner.encode(text, add_special).map_err(|e| EngineError::Tokenize(e.to_string()))?;
        let tokens =
            encoding.get_ids().iter().zip(encoding.get_tokens()).zip(encoding.get_special_tokens_mask());
        let spans = tokens.zip(encoding.get_offsets()).map(|(((&id, token), &special), &(start, stop))| {
            let special = special == 1;
            match special {
                true => TokenSpan { id, text: token.clone(), special, start: None, stop: None },
                false => {
                    let text = text.get(start..stop).unwrap_or(token).to_string();
                    TokenSpan { id, text, special, start: Some(start), stop: Some(stop) }
                }
            }
        });
        Ok(spans.collect())
    }

    /// The text of `ids`, without the special tokens when `skip_special`.
    pub fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String, EngineError> {
        self.inner.decode(ids, skip_special).map_err(|e| EngineError::Tokenize(e.to_string()))
    }
}

/// Cuts `ids` to `max_len` tokens, keeping the final special token (`[SEP]`) at the end.
pub fn truncate(ids: &mut Vec<u32>, max_len: usize) {
    if ids.len() > max_len && max_len > 0 {
        let last = ids[ids.len() - 1];
        ids.truncate(max_len);
        ids[max_len - 1] = last;
    }
}

/// Cuts `ids` to `max_len` tokens from the start, keeping the first special token (`[CLS]`)
/// at the start.
pub fn truncate_start(ids: &mut Vec<u32>, max_len: usize) {
    if ids.len() > max_len && max_len > 0 {
        ids.drain(1..=ids.len() - max_len);
    }
}

#[cfg(test)]
mod tests {
    use super::{truncate, truncate_start};

    #[test]
    fn truncation_keeps_the_closing_token() {
        let mut ids = vec![101, 1, 2, 3, 4, 102];
        truncate(&mut ids, 4);
        assert_eq!(ids, vec![101, 1, 2, 102]);
        let mut short = vec![101, 102];
        truncate(&mut short, 4);
        assert_eq!(short, vec![101, 102]);
    }

    #[test]
    fn truncation_from_the_start_keeps_the_opening_token() {
        let mut ids = vec![101, 1, 2, 3, 4, 102];
        truncate_start(&mut ids, 4);
        assert_eq!(ids, vec![101, 3, 4, 102]);
        let mut short = vec![101, 102];
        truncate_start(&mut short, 4);
        assert_eq!(short, vec![101, 102]);
    }
}
