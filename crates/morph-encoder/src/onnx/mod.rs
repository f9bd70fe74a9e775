//! Morph's ONNX writer: the protobuf messages of an ONNX model, a graph builder, and the
//! BERT-family encoder graph written from a checkpoint.

mod builder;
mod encoder_graph;
pub mod outliers;
mod packing;
pub mod precision;
mod prepared;
pub mod product;
pub mod proto;
mod token_merge;
mod token_prune;
mod writer;

pub use encoder_graph::{
    ATTENTION_MASK, GraphOutput, GraphSpec, HIDDEN_IN, HIDDEN_OUT, INPUT_IDS, POOLED, PROMPT_IN,
    encoder_graph, encoder_graph_reusing, input_max,
};
pub use precision::{Dtype, Precision};
pub use prepared::PreparedProducts;

/// A fingerprint of the code that writes and runs the graph (see `build.rs`): a latency profile
/// is reused only by a build with the same.
pub const GRAPH_FINGERPRINT: &str = env!("MORPH_GRAPH_FINGERPRINT");
