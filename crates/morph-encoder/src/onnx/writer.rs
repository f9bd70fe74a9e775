//! The encoder graph being written: its builder, the checkpoint it reads, and the state the
//! writers of its parts share (`encoder_graph`, `packing`, `token_merge`, `token_prune` each add
//! the methods of their part).

use super::builder::Builder;
use super::precision::{IntegerKernel, Precision};
use super::prepared::PreparedProducts;
use crate::checkpoint::Checkpoint;

/// A score that ranks last: padding in token pruning and merging.
pub(super) const MASKED: f32 = -1e9;

pub(super) struct Writer<'a> {
    pub(super) g: Builder,
    pub(super) ckpt: &'a Checkpoint,
    /// The checkpoint's int8 products, prepared once for all its graphs.
    pub(super) products: &'a PreparedProducts,
    /// MPNet's relative bias table and bucket index, once written.
    pub(super) relative: Option<(String, String)>,
    pub(super) precision: Precision,
    /// What multiplies int8 products, where the precision is int8.
    pub(super) kernel: IntegerKernel,
    /// The layout of the hidden states between the layers.
    pub(super) tokens: Tokens,
}

/// How a graph's hidden states (and Q, K, V, each as wide) lie between its layers.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tokens {
    /// `[batch, len, hidden]`, padding rows included.
    Padded,
    /// `[real tokens, hidden]`.
    Packed {
        /// The flat positions (`batch · len + i`) of the real tokens, `[tokens]`.
        real: String,
        /// For each flat position, the row among the real tokens that fills it there, `[batch · len]`
        /// (a padding position gets its row's last real token: any finite row serves).
        slot: String,
        /// `[-1, hidden]`: the padded states as rows.
        rows: String,
        /// `[batch, len, hidden]`.
        padded: String,
        /// Each sequence's count of real tokens, `[batch]` int64: its rows among the packed
        /// ones follow the sequences before it.
        lengths: String,
    },
}
