//! A decoder as the server holds it: its network (weights, or its shape alone where its kernels
//! hold their own) and the tokenizer and chat template read from the same GGUF file.

use crate::gguf_tokenizer::GgufTokenizer;
use crate::llama::Llama;

/// A decoder's network and its tokenizer.
#[derive(Debug)]
pub struct DecoderModel {
    pub llama: Llama,
    pub tokenizer: GgufTokenizer,
}
