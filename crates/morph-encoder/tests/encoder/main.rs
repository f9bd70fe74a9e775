//! morph-encoder's integration tests in one binary: each file is a module, so the encoder
//! is linked once, not once per file. `sessions_at_once.rs` stays a binary of its own: it needs a
//! process where no session has been built before it.

mod architecture;
mod batch_invariance;
mod encoder_numerics;
mod non_finite;
mod ort_numerics;
mod prompt_plans;
mod quantized;
mod row_operators;
