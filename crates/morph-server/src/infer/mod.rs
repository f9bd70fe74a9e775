//! The work behind the HTTP routes, free of HTTP: tokenizing, admission through the driver,
//! waiting for the engines, OTAS's task heads and SSJF's length predictions. A handler checks
//! its request into a `Valid*` value ([`ValidEmbed`], [`ValidClassify`], [`ValidGeneration`]) and hands it to the [`Embedder`] or the
//! [`Generator`] of its server.

mod classify;
mod embed;
mod generate;
mod prefill;
mod valid;

pub use classify::Classified;
pub use embed::{Embedded, Embedder};
pub use generate::{Generator, StartedGeneration, Truth};
pub use valid::{EmbedInputs, GenerationFormat, Prompt, ValidClassify, ValidEmbed, ValidGeneration};
