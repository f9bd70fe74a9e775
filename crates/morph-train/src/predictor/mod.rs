//! Training SSJF's output-length predictor (§3.1) and scoring it as the paper's Table 2: the
//! datasets of prompts and output lengths, the head's training, the top layers' tuning.

pub mod dataset;
pub mod evaluate;
pub mod train;
pub mod tune;

pub use evaluate::score;
pub use train::train;
