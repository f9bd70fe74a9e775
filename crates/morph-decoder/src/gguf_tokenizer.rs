//! The tokenizer a GGUF file carries, run by llama.cpp itself (the file loaded vocabulary-only):
//! every vocabulary type and pre-tokenizer llama.cpp implements (SmolLM's, Llama 3's, Qwen's,
//! SentencePiece, …) with its control tokens and end-of-generation tokens; llama.cpp refuses a
//! pre-tokenizer it does not know, by name. Also the chat template in the file's metadata.

use std::path::Path;
use std::sync::OnceLock;

use candle_core::quantized::gguf_file::Content;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::token::LlamaToken;

use crate::chat::{ChatError, ChatTemplate, Message};
use crate::grammar::{Grammar, GrammarSource, Grammars};
use crate::tool_calls::{Tool, ToolFormat, fold_into_turns};
use morph_engine::EngineError;

/// Control tokens that open a chat turn in the templates of the families people serve (ChatML,
/// Llama 3, Gemma): where a prompt's pieces start (see [`super::pieces`]).
const TURN_STARTS: [&str; 3] = ["<|im_start|>", "<|start_header_id|>", "<start_of_turn>"];

pub struct GgufTokenizer {
    /// The GGUF file loaded vocabulary-only (no tensors).
    vocab: LlamaModel,
    /// The chat template's turn-start token, where a prompt's pieces start; `None` for a
    /// template that has none of [`TURN_STARTS`].
    pub turn_start: Option<u32>,
    /// The chat template from the file's metadata (`tokenizer.chat_template`).
    chat: Option<ChatTemplate>,
    /// The grammars over this vocabulary, made at the first constrained call.
    grammars: OnceLock<Result<Grammars, String>>,
}

impl std::fmt::Debug for GgufTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufTokenizer")
            .field("tokens", &self.vocab.n_vocab())
            .field("turn_start", &self.turn_start)
            .field("chat", &self.chat.is_some())
            .finish()
    }
}

/// What the file says its tokenizer is (`tokenizer.ggml.model` and `.pre`), for an error about it.
fn kind(path: &Path) -> String {
    let content = std::fs::File::open(path).ok().and_then(|mut f| Content::read(&mut f).ok());
    let meta = |key: &str| {
        let value = content.as_ref().and_then(|c| c.metadata.get(key)).and_then(|v| v.to_string().ok());
        value.map_or_else(|| format!("no {key}"), |v| format!("{key} {v:?}"))
    };
    format!("{}, {}", meta("tokenizer.ggml.model"), meta("tokenizer.ggml.pre"))
}

fn load_err(detail: impl std::fmt::Display) -> EngineError {
    EngineError::Load(format!("GGUF tokenizer: {detail}"))
}

impl GgufTokenizer {
    /// The tokenizer and chat template of the GGUF file at `path`.
    pub fn load(path: &Path) -> Result<Self, EngineError> {
        let params = LlamaModelParams::default().with_vocab_only(true);
        let vocab =
            LlamaModel::load_from_file(crate::llamacpp_init::backend()?, path, &params).map_err(|e| {
                load_err(format!(
                    "llama.cpp could not read the vocabulary of {} ({}): {e}",
                    path.display(),
                    kind(path)
                ))
            })?;
        let mut tokenizer = Self { vocab, turn_start: None, chat: None, grammars: OnceLock::new() };
        tokenizer.turn_start = TURN_STARTS.iter().find_map(|text| tokenizer.control_token(text));
        if let Ok(template) = tokenizer.vocab.chat_template(None) {
            tokenizer = tokenizer.with_chat_template(template.to_string().map_err(load_err)?)?;
        }
        Ok(tokenizer)
    }

    /// This tokenizer with the chat template `source` (Jinja) in place of the file's.
    pub fn with_chat_template(mut self, source: String) -> Result<Self, EngineError> {
        let bos = self.piece(self.vocab.vocab().bos());
        let template = ChatTemplate::new(source, bos, self.eos_text())
            .map_err(|e| load_err(format!("the chat template does not parse: {e}")))?;
        self.chat = Some(template);
        Ok(self)
    }

    /// The id of control token `text`, if the vocabulary has it whole.
    fn control_token(&self, text: &str) -> Option<u32> {
        match self.vocab.vocab().tokenize(text.as_bytes(), false, true).as_slice() {
            [one] if self.vocab.vocab().is_control(*one) => u32::try_from(one.0).ok(),
            _ => None,
        }
    }

    /// Token `id`'s text, control tokens written out; empty for no token (a vocabulary without
    /// a BOS gives −1, and llama.cpp aborts the process on an id outside its vocabulary).
    fn piece(&self, id: LlamaToken) -> String {
        let vocab = self.vocab.vocab();
        if !(0..vocab.n_tokens()).contains(&id.0) {
            return String::new();
        }
        String::from_utf8_lossy(&vocab.token_to_piece(id, true, None)).into_owned()
    }

    /// The end-of-sequence token's text (`eos_token` in a chat template).
    fn eos_text(&self) -> String {
        self.piece(self.vocab.vocab().eos())
    }

    /// Whether generation ends at `id`: llama.cpp's end-of-generation tokens (end of sequence,
    /// end of turn, and the others the vocabulary marks).
    pub fn is_end(&self, id: u32) -> bool {
        i32::try_from(id).is_ok_and(|id| self.vocab.vocab().is_eog(LlamaToken(id)))
    }

    /// The beginning-of-sequence token, if [`Self::encode`] starts every text with it.
    pub fn bos(&self) -> Option<u32> {
        let vocab = self.vocab.vocab();
        vocab.should_add_bos().then(|| vocab.bos().0 as u32)
    }

    /// How many tokens the vocabulary holds (ids are below it).
    pub fn vocab_size(&self) -> usize {
        usize::try_from(self.vocab.n_vocab()).unwrap_or_default()
    }

    /// The end-of-sequence token.
    pub fn eos(&self) -> u32 {
        self.vocab.vocab().eos().0 as u32
    }

    /// Token ids of `text`, with the beginning-of-sequence token where the model asks for one;
    /// control tokens written in it (`<|im_start|>`) become their ids. A character the
    /// vocabulary has no token for is an error naming it: llama.cpp's BPE drops it silently
    /// (SmolLM2 has none for the control bytes 4, 6, 19, 20, 22 and 29; found by the
    /// `gguf_tokenizer` fuzz target).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, EngineError> {
        let vocab = self.vocab.vocab();
        let ids = vocab.tokenize(text.as_bytes(), vocab.should_add_bos(), true);
        let back = match ids.is_empty() {
            true => Vec::new(),
            false => vocab.detokenize(&ids, true, true),
        };
        let back = String::from_utf8_lossy(&back);
        // Spaces may differ (SentencePiece's prefix space, a model's cleaning of " ,"); any
        // other character lost is refused.
        let (mut text_chars, mut back_chars) =
            (text.chars().filter(|&c| c != ' '), back.chars().filter(|&c| c != ' '));
        loop {
            match (text_chars.next(), back_chars.next()) {
                (None, None) => break,
                (a, b) if a == b => continue,
                (lost, _) => {
                    let what = lost.map_or_else(String::new, |c| format!(" {c:?} (U+{:04X})", u32::from(c)));
                    return Err(EngineError::Unrepresentable(format!(
                        "the text holds a character{what} that this model's vocabulary has no token for"
                    )));
                }
            }
        }
        Ok(ids.into_iter().map(|t| t.0 as u32).collect())
    }

    /// Text of `ids` as generated (each token's piece in turn), control tokens left out; a
    /// character cut at the end reads as U+FFFD.
    pub fn decode(&self, ids: &[u32]) -> Result<String, EngineError> {
        let vocab = self.vocab.vocab();
        let mut bytes = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            // llama.cpp aborts the process on an id past its vocabulary.
            let token = i32::try_from(id).ok().filter(|&t| t < vocab.n_tokens());
            let token =
                token.ok_or_else(|| EngineError::Tokenize(format!("token {id} is not in the vocabulary")))?;
            vocab.token_to_piece_into(LlamaToken(token), &mut bytes, false, None);
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// The prompt for `messages` by the model's chat template, ending where the assistant's
    /// reply starts, with `tools` offered: written by the template where it writes tools, else
    /// folded into the turns ([`crate::tool_calls::fold_into_turns`]).
    pub fn chat_prompt(&self, messages: &[Message], tools: &[Tool]) -> Result<String, ChatError> {
        let template = self.chat.as_ref().ok_or(ChatError::NoTemplate)?;
        match (tools.is_empty(), template.takes_tools()) {
            (true, _) => template.render(messages, None),
            (false, true) => {
                template.render(messages, Some(&tools.iter().map(Tool::as_json).collect::<Vec<_>>()))
            }
            (false, false) => template.render(&fold_into_turns(self.tool_format(), messages, tools), None),
        }
    }

    /// How this model writes tool calls: the format its template writes tools in, else the
    /// one they are folded into its turns in.
    pub fn tool_format(&self) -> ToolFormat {
        match &self.chat {
            Some(template) if template.takes_tools() => ToolFormat::of_template(template.source()),
            Some(template) => ToolFormat::folded_into(template.source()),
            None => ToolFormat::Hermes,
        }
    }

    /// `source` compiled over this vocabulary for constrained decoding (the first call walks
    /// the vocabulary once, a few hundred milliseconds).
    pub fn grammar(&self, source: GrammarSource) -> Result<Grammar, String> {
        let grammars = self.grammars.get_or_init(|| {
            Grammars::new(&llama_cpp_2::sampling::LlamaSampler::llguidance_tok_env(&self.vocab))
        });
        grammars.as_ref().map_err(Clone::clone)?.compile(source)
    }
}
