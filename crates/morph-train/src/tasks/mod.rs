//! Classification tasks on a shared encoder (OTAS): their data, and training their heads and
//! prompts.

pub mod data;
pub mod head_train;
pub mod prompt_train;
