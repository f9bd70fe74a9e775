//! What computes a deployment's batches, chosen once ([`EngineKind`]: `--engine` by name from
//! [`ENGINES`], or a decoder for `--task generate`) and loaded once ([`Backend`]): the weights
//! stay in host memory, and every instance the server, `morph profile` or `morph train` starts is
//! built from them ([`Backend::engine`]), so a new runtime starts without reading them from disk
//! again.
//!
//! Adding an engine: a file in `engines/` implementing [`EngineConfig`] and [`LoadedModel`],
//! and its line in [`ENGINES`].

mod backend;
mod engine;
pub mod engines;
mod registry;
pub mod tuning;

pub use backend::Backend;
pub use engine::{DecoderSteps, EngineCan, EngineConfig, EngineKind, LoadedModel, ModelInput, WorkerStart};
pub use registry::{DEFAULT_ENGINE, ENGINES, EngineEntry, EngineFlags};
