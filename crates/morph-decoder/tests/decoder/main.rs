//! morph-decoder's integration tests in one binary: each file is a module, so the decoder
//! is linked once, not once per file.

mod decoder;
mod prefill_weights;
mod prompt_cache;
mod tool_grammars;
mod vocabularies;
