//! What computes a deployment's batches, chosen once ([`EngineKind`], the `--engine` flag) and
//! loaded once ([`Backend`]): the weights stay in host memory, and every instance the server,
//! `morph profile` or `morph train` starts is built from them ([`Backend::engine`]), so a new
//! runtime starts without reading them from disk again.

mod backend;
mod kind;
pub mod tuning;

pub use backend::{Backend, DecoderSteps};
pub use kind::{EngineCan, EngineKind, NO_STAGES_OF_ONNX_FILE, NO_STAGES_ON_CANDLE};
