//! The tokenizer a GGUF file carries in its metadata (`tokenizer.ggml.*`): for a `gpt2` model,
//! byte-level BPE from the token strings and merges, with control tokens (type 3) kept whole.
//! SmolLM's pre-tokenizer (`smollm`) splits digits one by one, then applies GPT-2's rule; a GGUF
//! with another pre-tokenizer is refused.

use candle_core::quantized::gguf_file::{Content, Value};
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::BPE;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::{AddedToken, Tokenizer};

use morph_engine::EngineError;

/// `tokenizer.ggml.token_type` of control tokens (`<|im_start|>`, `<|endoftext|>`, …).
const CONTROL: i32 = 3;

/// The one pre-tokenizer (`tokenizer.ggml.pre`) this tokenizer implements: SmolLM's.
const SMOLLM: &str = "smollm";

/// Where a message starts in the ChatML prompts Morph writes ([`super::chatml_prompt`]).
const TURN_START: &str = "<|im_start|>";

#[derive(Debug, Clone)]
pub struct GgufTokenizer {
    inner: Tokenizer,
    /// End of sequence: generation stops here.
    pub eos: u32,
    /// The chat template's turn-start token (`<|im_start|>`), where a prompt's pieces start.
    pub turn_start: Option<u32>,
}

fn load_err(detail: impl std::fmt::Display) -> EngineError {
    EngineError::Load(format!("GGUF tokenizer: {detail}"))
}

fn strings(content: &Content, key: &str) -> Result<Vec<String>, EngineError> {
    let values = content.metadata.get(key).ok_or_else(|| load_err(format!("no {key}")))?;
    values.to_vec().map_err(load_err)?.iter().map(|v| v.to_string().cloned().map_err(load_err)).collect()
}

fn int(content: &Content, key: &str) -> Result<u32, EngineError> {
    content.metadata.get(key).ok_or_else(|| load_err(format!("no {key}")))?.to_u32().map_err(load_err)
}

impl GgufTokenizer {
    pub fn from_gguf(content: &Content) -> Result<Self, EngineError> {
        let model = content.metadata.get("tokenizer.ggml.model").and_then(|v| v.to_string().ok());
        if model.map(String::as_str) != Some("gpt2") {
            return Err(load_err(format!("model {model:?} is not gpt2 (byte-level BPE)")));
        }
        // Another pre-tokenizer (Llama 3's, Qwen's, …) splits text otherwise: its prompts would
        // get wrong token ids with no error, so such a GGUF is refused by name.
        let pre = content.metadata.get("tokenizer.ggml.pre").and_then(|v| v.to_string().ok());
        if pre.map(String::as_str) != Some(SMOLLM) {
            return Err(load_err(format!(
                "tokenizer.ggml.pre {pre:?} is not supported: Morph's GGUF tokenizer implements SmolLM's pre-tokenizer (\"{SMOLLM}\") only"
            )));
        }
        let tokens = strings(content, "tokenizer.ggml.tokens")?;
        let merges = strings(content, "tokenizer.ggml.merges")?
            .into_iter()
            .map(|m| {
                m.split_once(' ').map(|(a, b)| (a.to_string(), b.to_string())).ok_or_else(|| load_err(&m))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let types: Vec<i32> = match content.metadata.get("tokenizer.ggml.token_type") {
            Some(Value::Array(values)) => values.iter().map(|v| v.to_i32().unwrap_or(1)).collect(),
            _ => vec![1; tokens.len()],
        };
        let vocab: tokenizers::models::bpe::Vocab =
            tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();
        let bpe = BPE::builder().vocab_and_merges(vocab, merges).build().map_err(load_err)?;
        let mut inner = Tokenizer::new(bpe);
        inner.with_pre_tokenizer(Some(Sequence::new(vec![
            Digits::new(true).into(),
            ByteLevel::new(false, true, true).into(),
        ])));
        inner.with_decoder(Some(ByteLevelDecoder::default()));
        let control: Vec<AddedToken> = tokens
            .iter()
            .zip(&types)
            .filter(|(_, t)| **t == CONTROL)
            .map(|(s, _)| AddedToken::from(s.clone(), true))
            .collect();
        inner.add_special_tokens(&control);
        let turn_start = inner.token_to_id(TURN_START);
        Ok(Self { inner, eos: int(content, "tokenizer.ggml.eos_token_id")?, turn_start })
    }

    /// Token ids of `text`; control tokens written in it (`<|im_start|>`) become their ids. A
    /// character the vocabulary has no token for is an error naming it: BPE would drop it
    /// silently (SmolLM2 has none for the control bytes 4, 6, 19, 20, 22 and 29; found by the
    /// `gguf_tokenizer` fuzz target).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, EngineError> {
        let tokenize = |e: tokenizers::Error| EngineError::Tokenize(e.to_string());
        let ids = self.inner.encode(text, false).map_err(tokenize)?.get_ids().to_vec();
        let back = self.inner.decode(&ids, false).map_err(tokenize)?;
        if back != text {
            let lost = text.chars().zip(back.chars().chain(std::iter::repeat('\0'))).find(|(a, b)| a != b);
            let what = lost.map_or_else(String::new, |(c, _)| format!(" {c:?} (U+{:04X})", u32::from(c)));
            return Err(EngineError::Unrepresentable(format!(
                "the text holds a character{what} that this model's vocabulary has no token for"
            )));
        }
        Ok(ids)
    }

    /// Text of `ids`, control tokens left out.
    pub fn decode(&self, ids: &[u32]) -> Result<String, EngineError> {
        self.inner.decode(ids, true).map_err(|e| EngineError::Tokenize(e.to_string()))
    }
}
