//! Training and measuring what Morph schedules with: SSJF's output-length predictor
//! ([`predictor`]), OTAS's task heads and prompts ([`tasks`]), the datasets they learn from, and
//! engines' latency profiles ([`profile`]). The server and the simulator never depend on it;
//! `morph train` and `morph profile` do.

pub mod adapt;
pub mod fit;
pub mod lengths;
pub mod predictor;
pub mod predictor_run;
pub mod profile;
pub mod tasks;

pub use fit::TrainConfig;
