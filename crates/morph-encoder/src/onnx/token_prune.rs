//! Pruning once (Morph's own plan, spec §6.8): after an early layer, keep only the tokens that
//! received the most attention in it. Text is short and not redundant the way image patches
//! are, so one cut after the layers that mixed the sentence is the alternative to merging a
//! few tokens in every layer.

use super::proto::Attr;
use super::writer::{MASKED, Writer};

impl Writer<'_> {
    /// Keeps ⌈(1 − percent/100) · n⌉ of the `n` tokens of `x` `[batch, n, hidden]`: those the
    /// layer's attention `probs` `[batch, heads, n, n]` looked at most (mean over heads and
    /// queries), `[CLS]` always, padding (size 0, which no query looks at) first to go.
    /// Returns the kept tokens and their sizes.
    pub(super) fn prune_tokens(
        &mut self,
        x: &str,
        sizes: &str,
        probs: &str,
        percent: u8,
    ) -> (String, String) {
        let received = self.g.op(
            "ReduceMean",
            &[probs],
            vec![("axes", Attr::Ints(vec![1, 2])), ("keepdims", Attr::Int(0))],
        );
        let one = self.g.scalar(1.0);
        let real = self.g.op("Min", &[sizes, &one], vec![]);
        let padding = self.g.op("Sub", &[&real, &one], vec![]);
        let big = self.g.scalar(-MASKED);
        let padding = self.g.op("Mul", &[&padding, &big], vec![]);
        let received = self.g.op("Add", &[&received, &padding], vec![]);
        let received = self.first_replaced(&received, -3.0 * MASKED);
        let count = self.g.op("Shape", &[&received], vec![("start", Attr::Int(1)), ("end", Attr::Int(2))]);
        let count =
            self.g.op("Cast", &[&count], vec![("to", Attr::Int(super::proto::DataType::Float as i64))]);
        let share = self.g.scalar(1.0 - f32::from(percent) / 100.0);
        let keep = self.g.op("Mul", &[&count, &share], vec![]);
        let keep = self.g.op("Ceil", &[&keep], vec![]);
        let keep = self.g.op("Max", &[&keep, &one], vec![]);
        let keep = self.g.op("Cast", &[&keep], vec![("to", Attr::Int(super::proto::DataType::Int64 as i64))]);
        let [_, order] =
            self.g.op_n("TopK", &[&received, &keep], vec![("axis", Attr::Int(1)), ("largest", Attr::Int(1))]);
        let rows = self.rows_index(&order, self.ckpt.config.hidden_size as i64);
        let x = self.g.op("GatherElements", &[x, &rows], vec![("axis", Attr::Int(1))]);
        (x, self.g.op("GatherElements", &[sizes, &order], vec![("axis", Attr::Int(1))]))
    }
}
