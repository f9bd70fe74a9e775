//! Classification tasks on a shared encoder (OTAS) as served: their heads, and the trained
//! prompt tokens a prompt plan adds. `morph-train` trains both.

pub mod head;
pub mod prompts;
pub mod served;
