//! Self-attention over packed tokens, Morph's kernel for `PackedAttention`: one sequence's
//! rows of the joint Q·K·V projection (`[len, 3 · hidden]`, the queries already scaled by
//! 1/√d) to its context rows (`[len, hidden]`), head by head, `softmax(q·kᵀ)·v` over that
//! sequence's tokens only. The standard graph spreads Q, K and V to the padded
//! `[batch, heads, len, d]` layout (Split, Gather, Reshape, Transpose), masks the padding with
//! a bias on the scores and gathers the context back; here no padding is computed, and a
//! text's context depends on its own tokens alone, whatever its neighbours.
//!
//! The two products of each head are `gemm`'s (the crate candle multiplies with: its kernels
//! chosen for the CPU at run time), reading Q, K and V where they lie in the projection's rows
//! and writing the context where it belongs, through strides; the softmax between them is
//! written over fixed lanes so that it vectorises, compiled for AVX-512 and AVX2.

#![allow(unsafe_code)]

use gemm::Parallelism;
use multiversion::multiversion;

use crate::kernels::exp_nonpositive;

/// Floats the softmax handles together (one AVX-512 register, two AVX2 ones).
const LANES: usize = 16;

/// One sequence's context for every head: `qkv` its `len` rows of `3 · hidden` (queries, keys,
/// values), `out` its `len` rows of `hidden` (none for a row of padding alone).
#[multiversion(targets("x86_64+avx512f+avx512bw+avx2+fma", "x86_64+avx2+fma"))]
pub fn attend(qkv: &[f32], hidden: usize, heads: usize, out: &mut [f32]) {
    let d = hidden.checked_div(heads).unwrap_or(0);
    assert!(d > 0 && hidden == d * heads, "{heads} heads of {hidden}");
    let len = out.len() / hidden;
    assert_eq!((qkv.len(), out.len()), (3 * len * hidden, len * hidden), "rows of {hidden}");
    if len == 0 {
        return;
    }
    // Scores row by row, each row padded to whole lanes.
    let width = len.next_multiple_of(LANES);
    let mut scores = vec![0f32; len * width];
    for at in (0..hidden).step_by(d) {
        let (queries, keys, values) = (at, hidden + at, 2 * hidden + at);
        // s = q · kᵀ: [len, d] rows of the projection times their keys, transposed by strides.
        let stride = 3 * hidden;
        let (q, k) = (
            View { data: qkv, at: queries, row: stride, column: 1 },
            View { data: qkv, at: keys, row: 1, column: stride },
        );
        product((&mut scores, 0, width), q, k, [len, len, d]);
        for row in scores.chunks_exact_mut(width) {
            softmax(row, len);
        }
        // context = p · v, straight into the head's columns of `out`.
        let (p, v) = (
            View { data: &scores, at: 0, row: width, column: 1 },
            View { data: qkv, at: values, row: stride, column: 1 },
        );
        product((out, at, hidden), p, v, [len, d, len]);
    }
}

/// A matrix inside a slice: where its first element lies, and how far apart its rows and its
/// columns are.
#[derive(Clone, Copy)]
struct View<'a> {
    data: &'a [f32],
    at: usize,
    row: usize,
    column: usize,
}

impl View<'_> {
    /// Whether a `[rows, columns]` matrix from here lies inside the slice.
    fn holds(&self, rows: usize, columns: usize) -> bool {
        self.at + (rows - 1) * self.row + (columns - 1) * self.column < self.data.len()
    }
}

/// `dst = a · b` for `[m, n, k]` (`a` m × k, `b` k × n, each at least 1): `dst` given as a slice,
/// the first element's index and the distance between rows, its columns next to each other.
fn product((dst, at, row): (&mut [f32], usize, usize), a: View<'_>, b: View<'_>, [m, n, k]: [usize; 3]) {
    assert!(m > 0 && n > 0 && k > 0, "an empty product");
    assert!(at + (m - 1) * row + n <= dst.len() && a.holds(m, k) && b.holds(k, n), "a view past its slice");
    // SAFETY: every element gemm reads or writes lies inside its slice (asserted above), and
    // `dst`, borrowed uniquely, overlaps neither `a` nor `b`.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr().add(at),
            1,
            row as isize,
            false,
            a.data.as_ptr().add(a.at),
            a.column as isize,
            a.row as isize,
            b.data.as_ptr().add(b.at),
            b.column as isize,
            b.row as isize,
            0.0,
            1.0,
            false,
            false,
            false,
            Parallelism::None,
        )
    }
}

/// `row[..len]` to its softmax in place, the padding after it to zeros.
#[inline(always)]
fn softmax(row: &mut [f32], len: usize) {
    row[len..].fill(f32::NEG_INFINITY);
    let max = lanes(row, f32::NEG_INFINITY, |m, v| if v > m { v } else { m });
    row.iter_mut().for_each(|s| *s = exp_nonpositive(*s - max));
    row[len..].fill(0.0);
    let scale = 1.0 / lanes(row, 0.0, |a, v| a + v);
    row.iter_mut().for_each(|s| *s *= scale);
}

/// `fold` over `xs` (a whole number of lanes) lane by lane, then the lanes in halves: the
/// order that vectorises and keeps the chain of dependent steps short.
#[inline(always)]
fn lanes(xs: &[f32], init: f32, fold: impl Fn(f32, f32) -> f32) -> f32 {
    let mut acc = [init; LANES];
    for block in xs.chunks_exact(LANES) {
        acc.iter_mut().zip(block).for_each(|(a, &v)| *a = fold(*a, v));
    }
    let mut half = LANES / 2;
    while half > 0 {
        for i in 0..half {
            acc[i] = fold(acc[i], acc[i + half]);
        }
        half /= 2;
    }
    acc[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// softmax(q·kᵀ)·v head by head in f64, as written.
    fn reference(qkv: &[f32], hidden: usize, heads: usize) -> Vec<f32> {
        let (d, len) = (hidden / heads, qkv.len() / (3 * hidden));
        let at = |i: usize, part: usize, c: usize| f64::from(qkv[i * 3 * hidden + part * hidden + c]);
        let mut out = vec![0.0; len * hidden];
        for h in 0..heads {
            for i in 0..len {
                let scores: Vec<f64> = (0..len)
                    .map(|j| (0..d).map(|c| at(i, 0, h * d + c) * at(j, 1, h * d + c)).sum())
                    .collect();
                let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let p: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let sum: f64 = p.iter().sum();
                for c in 0..d {
                    let v: f64 = (0..len).map(|j| p[j] * at(j, 2, h * d + c)).sum();
                    out[i * hidden + h * d + c] = (v / sum) as f32;
                }
            }
        }
        out
    }

    fn projections(len: usize, hidden: usize, seed: usize) -> Vec<f32> {
        (0..len * 3 * hidden).map(|i| (((i + seed) * 7919 % 1013) as f32 / 1013.0 - 0.5) * 2.0).collect()
    }

    #[test]
    fn each_head_is_softmax_of_its_scores_times_its_values() {
        // Lengths around the query block (4) and the step of keys (32); one to twelve heads.
        for (len, hidden, heads) in
            [(0, 64, 2), (1, 64, 2), (3, 64, 2), (4, 96, 3), (17, 64, 2), (33, 64, 1), (50, 384, 12)]
        {
            let qkv = projections(len, hidden, len);
            let mut out = vec![f32::NAN; len * hidden];
            attend(&qkv, hidden, heads, &mut out);
            let want = reference(&qkv, hidden, heads);
            for (i, (got, want)) in out.iter().zip(&want).enumerate() {
                assert!((got - want).abs() < 2e-5, "{len} x {hidden}/{heads}: value {i} {got} vs {want}");
            }
        }
    }

    #[test]
    fn very_negative_scores_neither_underflow_nor_let_padding_in() {
        // Every score far below zero: the max is taken over real keys only, so the weights do
        // not all vanish, and the zero keys padding the lane block (score 0) weigh nothing.
        let (len, hidden) = (5, 32);
        let mut qkv = vec![0.0f32; len * 3 * hidden];
        for (i, row) in qkv.chunks_exact_mut(3 * hidden).enumerate() {
            row[..hidden].fill(10.0);
            row[hidden..2 * hidden].fill(-1.0 - i as f32);
            row[2 * hidden..].fill(i as f32);
        }
        let mut out = vec![0.0; len * hidden];
        attend(&qkv, hidden, 1, &mut out);
        // Key 0 scores 320 above key 1: every query takes value 0 alone.
        assert!(out.iter().all(|&v| v.abs() < 1e-6), "{out:?}");
    }
}
