//! Classification tasks on a shared encoder (OTAS): their data, their heads, and the accuracy
//! of each task under each token plan.

pub mod data;
pub mod head;
pub mod prompt_train;
pub mod prompts;
pub mod served;
