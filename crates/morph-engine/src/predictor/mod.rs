//! SSJF's output-length predictor (§3.1): a frozen BERT-family encoder's pooled vector into a
//! small head trained in Rust, scored as the paper's Table 2.

pub mod cache;
pub mod dataset;
pub mod evaluate;
pub mod head;
pub mod model;
pub mod train;
pub mod tune;

pub use cache::LengthCache;
pub use evaluate::{Scores, score};
pub use head::{Buckets, HeadMeta, LengthHead, Objective};
pub use model::{LengthPredictor, embed_ids, embed_prompts, prompt_ids, stack};
pub use train::{TrainConfig, train};
