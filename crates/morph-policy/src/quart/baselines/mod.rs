//! The pipeline baselines QUART is measured against (spec §2.5), each a [`crate::pipeline::Sizer`]
//! inside the same executor: INFless-like, InferLine-like, Cocktail-like, and scaling the whole
//! pipeline uniformly.

pub mod cocktail;
pub mod inferline;
pub mod infless;
pub mod uniform;
