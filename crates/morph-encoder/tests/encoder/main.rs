//! morph-encoder's integration tests in one binary: each file is a module, so the encoder
//! is linked once, not once per file.

mod architecture;
mod batch_invariance;
mod encoder_numerics;
mod non_finite;
mod ort_numerics;
mod prompt_plans;
mod quantized;
mod row_operators;
mod sessions_at_once;
