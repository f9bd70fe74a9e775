//! SmolLM2's tokenizer (llama.cpp's, on its GGUF metadata): any text encodes to ids that decode back to it
//! (`encode` checks this; text that spells a control token such as `<|im_start|>` or
//! `<jupyter_script>` is read as that token), or is refused for a character the vocabulary
//! lacks; any token ids decode to text or a clear error.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use morph_decoder::GgufTokenizer;
use morph_fetch::fetch_default_decoder;
use morph_engine::EngineError;
use morph_fetch::{Pip, morph_home};

fn tokenizer() -> &'static GgufTokenizer {
    static TOKENIZER: OnceLock<GgufTokenizer> = OnceLock::new();
    TOKENIZER.get_or_init(|| {
        let path = fetch_default_decoder(&morph_home(), &Pip::from_env()).expect("SmolLM2");
        GgufTokenizer::load(&path).expect("SmolLM2")
    })
}

fuzz_target!(|data: &[u8]| {
    let tokenizer = tokenizer();
    if let Ok(text) = std::str::from_utf8(data) {
        // `encode` itself checks that its ids decode back to the text (control tokens kept).
        match tokenizer.encode(text) {
            Ok(ids) => {
                let decoded = tokenizer.decode(&ids).expect("its ids decode");
                assert!(decoded.len() <= text.len(), "decoding (control tokens left out) adds nothing");
            }
            Err(e) => assert!(matches!(e, EngineError::Unrepresentable(_)), "{e}"),
        }
    }
    let ids: Vec<u32> = data.chunks_exact(2).map(|b| u32::from(u16::from_le_bytes([b[0], b[1]]))).collect();
    let _ = tokenizer.decode(&ids);
});
