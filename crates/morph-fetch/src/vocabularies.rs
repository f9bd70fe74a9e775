//! llama.cpp's tokenizer test data, for tests: vocabulary-only GGUFs of the families llama.cpp
//! tokenizes (Qwen 2, Llama 3, SentencePiece Llama, Phi-3, …), each with test strings (`.inp`)
//! and the token ids Hugging Face's own tokenizer gives them (`.out`), and the chat templates
//! of well-known models (`templates/`). They come from llama.cpp's source as the
//! `llama-cpp-python` source package on PyPI ships it, cached in `MORPH_HOME/llama.cpp-vocab/`.

use std::path::{Path, PathBuf};

use crate::model::install_wheel;
use crate::{FetchError, Pip, Wheel};

const PACKAGE: Wheel = Wheel {
    spec: "llama-cpp-python==0.3.36",
    args: &["--no-binary", ":all:"],
    prefix: "llama_cpp_python-0.3.36/vendor/llama.cpp/models/",
    what: "llama.cpp's tokenizer test vocabularies",
    instead: "copy llama.cpp's models/ folder into MORPH_HOME/llama.cpp-vocab",
};
const CHECKED: &str = "ggml-vocab-qwen2.gguf";
const CHECKED_SHA256: &str = "44c2f46b715f585c6ab513970e8a006bfa5badd6108560054921cf598d154d8c";

/// The folder holding llama.cpp's `ggml-vocab-*.gguf` (with `.inp`/`.out`) and `templates/`,
/// fetched into `home` on first use.
pub fn fetch_llama_cpp_vocabularies(home: &Path, pip: &Pip) -> Result<PathBuf, FetchError> {
    let dir = home.join("llama.cpp-vocab");
    let wanted = |rel: &str| rel.starts_with("ggml-vocab-") || rel.starts_with("templates/");
    install_wheel(pip, PACKAGE, &wanted, &dir, (CHECKED, CHECKED_SHA256), &[])?;
    Ok(dir)
}
