//! What to serve, resolved. A [`ServeSpec`] is what `morph serve` was asked, typed (the CLI only
//! parses flags into it); [`ServeSpec::resolve`] turns it into the [`Deployment`] a server is
//! built from: the model fetched, the engine chosen (ONNX Runtime fetched, or candle), the
//! runtimes and their layout read off this host's profile where none were given, the policy and
//! the limits it is given, the length predictor. Each rule of what goes together is checked
//! once: the spec's own in [`ServeSpec::check`], the engine's in [`engine`], and what the policy,
//! engine, stages and workers need of each other where the server is built
//! (`morph_server::deployment`).

mod defaults;
pub mod engine;
pub mod model;
mod plan_profiles;
pub mod predictor;
mod prompt_cache;
mod resolve;
pub mod spec;

pub use engine::EngineSpec;
pub use model::ModelChoice;
pub use morph_server::Deployment;
pub use predictor::PredictorChoice;
pub use spec::{ServeSpec, Task};
