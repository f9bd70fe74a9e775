//! OTAS (Chen et al., "An Elastic Transformer Serving System via Token Adaptation"): one shared
//! encoder serves many tasks; each batch runs under a token plan γ (prompt tokens for accuracy,
//! token merging for speed), chosen to maximise the utility answered within deadlines. The
//! implementation-ready reading is `shared/specs/otas.md`; one file per algorithm.

pub mod batching;
pub mod config;
pub mod guard;
pub mod manual;
pub mod plan;
pub mod plan_table;
pub mod policy;

pub use config::OtasConfig;
pub use plan_table::{PlanEntry, PlanTable};
pub use policy::OtasPolicy;

#[cfg(test)]
mod tests;
