//! Padding removed between the layers: the hidden states of a batch's real tokens only,
//! `[tokens, hidden]`, as TurboTransformers and FasterTransformer's "effective transformer"
//! compute them. Every weight product, norm and activation is row by row, so it runs on the
//! real tokens alone. Attention, which mixes tokens of a sequence, runs on them too where
//! Morph's `PackedAttention` can take the model ([`crate::ort_kernels::attention`]); else it
//! sees the padded `[batch, len, …]` layout: the rows are gathered into it and out of it again.
//! In fp32 the results are the padded graph's (padding rows are never read: their keys are
//! masked). In int8 they are what zeroing the padding before every product would give: each
//! activation tensor's one quantisation scale is set by real tokens alone.

use super::proto::{Attr, DataType};
use super::writer::{Tokens, Writer};

impl Writer<'_> {
    /// The packed layout of the tokens of the float `mask` (`[batch, len]`, 1 real, 0 padding)
    /// for states `hidden` wide.
    pub(super) fn packed_tokens(&mut self, mask: &str, hidden: usize) -> Tokens {
        let shape = self.g.op("Shape", &[mask], vec![]);
        let width = self.g.i64s(&[hidden as i64]);
        let padded = self.g.op("Concat", &[&shape, &width], vec![("axis", Attr::Int(0))]);
        let rows = self.g.i64s(&[-1, hidden as i64]);
        let flat = self.g.i64s(&[-1]);
        let flat_mask = self.g.op("Reshape", &[mask, &flat], vec![]);
        let real = self.g.op("NonZero", &[&flat_mask], vec![]);
        let real = self.g.op("Reshape", &[&real, &flat], vec![]);
        let counts = self.g.op("Cast", &[&flat_mask], vec![("to", Attr::Int(DataType::Int64 as i64))]);
        let axis = self.g.i64_scalar(0);
        let counted = self.g.op("CumSum", &[&counts, &axis], vec![]);
        let one = self.g.i64s(&[1]);
        let slot = self.g.op("Sub", &[&counted, &one], vec![]);
        let sequence_axis = self.g.i64s(&[1]);
        let lengths = self.g.op("ReduceSum", &[mask, &sequence_axis], vec![("keepdims", Attr::Int(0))]);
        let lengths = self.g.op("Cast", &[&lengths], vec![("to", Attr::Int(DataType::Int64 as i64))]);
        Tokens::Packed { real, slot, rows, padded, lengths }
    }

    /// `x` (`[batch, len, hidden]`) in the graph's layout.
    pub(super) fn pack(&mut self, x: &str) -> String {
        let Tokens::Packed { real, rows, .. } = self.tokens.clone() else {
            return x.to_string();
        };
        let flat = self.g.op("Reshape", &[x, &rows], vec![]);
        self.g.op("Gather", &[&flat, &real], vec![("axis", Attr::Int(0))])
    }

    /// `x` in the graph's layout as `[batch, len, hidden]`.
    pub(super) fn unpack(&mut self, x: &str) -> String {
        let Tokens::Packed { slot, padded, .. } = self.tokens.clone() else {
            return x.to_string();
        };
        let spread = self.g.op("Gather", &[x, &slot], vec![("axis", Attr::Int(0))]);
        self.g.op("Reshape", &[&spread, &padded], vec![])
    }
}
