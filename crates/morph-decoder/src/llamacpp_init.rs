//! llama.cpp's process-wide state, shared by its tokenizer and its kernels.

use std::sync::OnceLock;

use llama_cpp_2::llama_backend::LlamaBackend;
use morph_engine::EngineError;

/// llama.cpp's process-wide state, initialised once (its logs silenced). llama.cpp allows one
/// per process, so code that runs llama.cpp beside the decoder (a test's reference) takes this one.
pub fn backend() -> Result<&'static LlamaBackend, EngineError> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    let backend = BACKEND.get_or_init(|| {
        let mut backend = LlamaBackend::init().map_err(|e| e.to_string())?;
        backend.void_logs();
        Ok(backend)
    });
    backend.as_ref().map_err(|e| EngineError::Load(format!("llama.cpp: {e}")))
}
