//! The work behind the HTTP routes, free of HTTP: tokenizing, admission through the driver,
//! waiting for the engines, OTAS's task heads, a classification checkpoint's own head and SSJF's length predictions. A handler checks
//! its request into a `Valid*` value ([`ValidEmbed`], [`ValidClassify`], [`ValidGeneration`]) and hands it to the [`Embedder`] or the
//! [`Generator`] of its server.

mod classify;
mod embed;
mod generate;
mod prefill;
mod score;
mod valid;

pub use classify::Classified;
pub use embed::{Embedded, Embedder, ModelKind};
pub use generate::{Echo, Generator, StartedGeneration, Truth};
pub use score::{Scored, ValidScore};
pub use valid::{
    EmbedInputs, GenerationFormat, Output, Prompt, Sequence, ToolChoice, ToolUse, Truncation, ValidClassify,
    ValidEmbed, ValidGeneration,
};
