//! SSJF's output-length predictor as served (§3.1): a frozen BERT-family encoder's pooled vector
//! into a small trained head; a cache of the true lengths of prompts seen (§6). `morph-train`
//! trains and scores the head.

pub mod cache;
pub mod head;
pub mod model;
pub mod prompt;

pub use cache::LengthCache;
pub use head::{Buckets, HeadMeta, LengthHead, Objective};
pub use model::{LengthPredictor, embed_ids, embed_prompts, prompt_ids, stack};
pub use prompt::predictor_text;
