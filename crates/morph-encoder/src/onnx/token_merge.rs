//! Token merging between attention and feed-forward (ToMe's bipartite soft matching, as OTAS
//! places it), written into the encoder graph: every shape stays static for a fixed runtime,
//! `r` tokens fewer after each layer (fewer where a short dynamic batch has no more to give).

use super::proto::Attr;
use super::writer::{MASKED, Writer};

impl Writer<'_> {
    /// ToMe's bipartite soft matching on `x` `[batch, n, hidden]` with token `sizes`
    /// `[batch, n]`: even positions (set A, `[CLS]` first) each pick their most similar odd
    /// position (set B) by key cosine; the `r` best-matched A tokens are added into their B
    /// partner, size-weighted, and the rest of A is kept in order. Padding (size 0) never
    /// outranks a real match, and merging it adds nothing. Returns `n − min(r, |A| − 1)`
    /// tokens and sizes.
    pub(super) fn merge_tokens(&mut self, x: &str, sizes: &str, keys: &str, r: usize) -> (String, String) {
        let (axis1, axis2) = (self.g.i64s(&[1]), self.g.i64s(&[2]));
        let norm =
            self.g.op("ReduceL2", &[keys], vec![("axes", Attr::Ints(vec![2])), ("keepdims", Attr::Int(1))]);
        let tiny = self.g.scalar(1e-12);
        let norm = self.g.op("Max", &[&norm, &tiny], vec![]);
        let unit = self.g.op("Div", &[keys, &norm], vec![]);
        let (a_keys, b_keys) = (self.alternate(&unit, 0), self.alternate(&unit, 1));
        let b_keys_t = self.g.op("Transpose", &[&b_keys], vec![("perm", Attr::Ints(vec![0, 2, 1]))]);
        let scores = self.g.op("MatMul", &[&a_keys, &b_keys_t], vec![]);
        // Padded B tokens are never a partner: −1e9 on their column.
        let (a_sizes, b_sizes) = (self.alternate(sizes, 0), self.alternate(sizes, 1));
        let one = self.g.scalar(1.0);
        let b_real = self.g.op("Min", &[&b_sizes, &one], vec![]);
        let b_pad = self.g.op("Sub", &[&b_real, &one], vec![]);
        let big = self.g.scalar(-MASKED);
        let b_pad = self.g.op("Mul", &[&b_pad, &big], vec![]);
        let b_pad = self.g.op("Unsqueeze", &[&b_pad, &axis1], vec![]);
        let scores = self.g.op("Add", &[&scores, &b_pad], vec![]);
        let best = self.g.op(
            "ReduceMax",
            &[&scores],
            vec![("axes", Attr::Ints(vec![2])), ("keepdims", Attr::Int(0))],
        );
        let partner =
            self.g.op("ArgMax", &[&scores], vec![("axis", Attr::Int(2)), ("keepdims", Attr::Int(0))]);
        // Padded A tokens and [CLS] rank last.
        let a_real = self.g.op("Min", &[&a_sizes, &one], vec![]);
        let a_pad = self.g.op("Sub", &[&a_real, &one], vec![]);
        let a_pad = self.g.op("Mul", &[&a_pad, &big], vec![]);
        let best = self.g.op("Add", &[&best, &a_pad], vec![]);
        let best = self.first_replaced(&best, 3.0 * MASKED);
        let count = self.g.op("Shape", &[&best], vec![("start", Attr::Int(1)), ("end", Attr::Int(2))]);
        let [_, order] =
            self.g.op_n("TopK", &[&best, &count], vec![("axis", Attr::Int(1)), ("largest", Attr::Int(1))]);
        // ToMe's clamp, r ≤ (n − 1) / 2 = |A| − 1: [CLS] is never merged and a short (dynamic)
        // sequence keeps at least two tokens, however many layers merge.
        let (zero, one_i, end) = (self.g.i64s(&[0]), self.g.i64s(&[1]), self.g.i64s(&[i64::MAX]));
        let most = self.g.op("Sub", &[&count, &one_i], vec![]);
        let r_const = self.g.i64s(&[r as i64]);
        let rr = self.g.op("Min", &[&r_const, &most], vec![]);
        let src = self.g.op("Slice", &[&order, &zero, &rr, &axis1], vec![]);
        let kept = self.g.op("Slice", &[&order, &rr, &end, &axis1], vec![]);
        let kept_count = self.g.op("Shape", &[&kept], vec![("start", Attr::Int(1)), ("end", Attr::Int(2))]);
        let [kept, _] = self.g.op_n(
            "TopK",
            &[&kept, &kept_count],
            vec![("axis", Attr::Int(1)), ("largest", Attr::Int(0))],
        );
        let dst = self.g.op("GatherElements", &[&partner, &src], vec![("axis", Attr::Int(1))]);
        // Sums of size-weighted states, then divided by the merged sizes.
        let sizes3 = self.g.op("Unsqueeze", &[sizes, &axis2], vec![]);
        let weighted = self.g.op("Mul", &[x, &sizes3], vec![]);
        let (a_x, b_x) = (self.alternate(&weighted, 0), self.alternate(&weighted, 1));
        let hidden = self.ckpt.config.hidden_size as i64;
        let (kept_rows, src_rows, dst_rows) =
            (self.rows_index(&kept, hidden), self.rows_index(&src, hidden), self.rows_index(&dst, hidden));
        let kept_x = self.g.op("GatherElements", &[&a_x, &kept_rows], vec![("axis", Attr::Int(1))]);
        let src_x = self.g.op("GatherElements", &[&a_x, &src_rows], vec![("axis", Attr::Int(1))]);
        let add = vec![("axis", Attr::Int(1)), ("reduction", Attr::Str("add"))];
        let b_x = self.g.op("ScatterElements", &[&b_x, &dst_rows, &src_x], add.clone());
        let kept_sizes = self.g.op("GatherElements", &[&a_sizes, &kept], vec![("axis", Attr::Int(1))]);
        let src_sizes = self.g.op("GatherElements", &[&a_sizes, &src], vec![("axis", Attr::Int(1))]);
        let b_sizes = self.g.op("ScatterElements", &[&b_sizes, &dst, &src_sizes], add);
        let summed = self.g.op("Concat", &[&kept_x, &b_x], vec![("axis", Attr::Int(1))]);
        let sizes = self.g.op("Concat", &[&kept_sizes, &b_sizes], vec![("axis", Attr::Int(1))]);
        let divisor = self.g.op("Max", &[&sizes, &one], vec![]);
        let divisor = self.g.op("Unsqueeze", &[&divisor, &axis2], vec![]);
        let merged = self.g.op("Div", &[&summed, &divisor], vec![]);
        self.real_first(&merged, &sizes)
    }

    /// `x` and `sizes` reordered so that real tokens come first, in their order, then padding:
    /// the next split into alternate sets then sees the same real tokens however much padding
    /// the row has.
    fn real_first(&mut self, x: &str, sizes: &str) -> (String, String) {
        let (zero, one) = (self.g.scalar(0.0), self.g.scalar(1.0));
        let cleared = self.g.op("Mul", &[sizes, &zero], vec![]);
        let ones = self.g.op("Add", &[&cleared, &one], vec![]);
        let axis = self.g.i64_scalar(1);
        let position = self.g.op("CumSum", &[&ones, &axis], vec![]);
        let real = self.g.op("Min", &[sizes, &one], vec![]);
        let padding = self.g.op("Sub", &[&one, &real], vec![]);
        let behind = self.g.scalar(1e7);
        let behind = self.g.op("Mul", &[&padding, &behind], vec![]);
        let key = self.g.op("Add", &[&position, &behind], vec![]);
        let count = self.g.op("Shape", &[&key], vec![("start", Attr::Int(1)), ("end", Attr::Int(2))]);
        let [_, order] =
            self.g.op_n("TopK", &[&key, &count], vec![("axis", Attr::Int(1)), ("largest", Attr::Int(0))]);
        let rows = self.rows_index(&order, self.ckpt.config.hidden_size as i64);
        let x = self.g.op("GatherElements", &[x, &rows], vec![("axis", Attr::Int(1))]);
        (x, self.g.op("GatherElements", &[sizes, &order], vec![("axis", Attr::Int(1))]))
    }

    /// Every other position of `t` along axis 1, from `start` (0: even, 1: odd).
    fn alternate(&mut self, t: &str, start: i64) -> String {
        let (from, end, axis, step) =
            (self.g.i64s(&[start]), self.g.i64s(&[i64::MAX]), self.g.i64s(&[1]), self.g.i64s(&[2]));
        self.g.op("Slice", &[t, &from, &end, &axis, &step], vec![])
    }

    /// `t` `[batch, n]` with its first column set to `value`.
    pub(super) fn first_replaced(&mut self, t: &str, value: f32) -> String {
        let (zero, one, end, axis) =
            (self.g.i64s(&[0]), self.g.i64s(&[1]), self.g.i64s(&[i64::MAX]), self.g.i64s(&[1]));
        let first = self.g.op("Slice", &[t, &zero, &one, &axis], vec![]);
        let nothing = self.g.scalar(0.0);
        let cleared = self.g.op("Mul", &[&first, &nothing], vec![]);
        let value = self.g.scalar(value);
        let first = self.g.op("Add", &[&cleared, &value], vec![]);
        let rest = self.g.op("Slice", &[t, &one, &end, &axis], vec![]);
        self.g.op("Concat", &[&first, &rest], vec![("axis", Attr::Int(1))])
    }

    /// Row indices `[batch, k]` spread over the hidden axis, `[batch, k, hidden]`, as
    /// GatherElements and ScatterElements take them.
    pub(super) fn rows_index(&mut self, index: &str, hidden: i64) -> String {
        let axis2 = self.g.i64s(&[2]);
        let index3 = self.g.op("Unsqueeze", &[index, &axis2], vec![]);
        let shape = self.g.op("Shape", &[index], vec![]);
        let width = self.g.i64s(&[hidden]);
        let shape = self.g.op("Concat", &[&shape, &width], vec![("axis", Attr::Int(0))]);
        self.g.op("Expand", &[&index3, &shape], vec![])
    }
}
