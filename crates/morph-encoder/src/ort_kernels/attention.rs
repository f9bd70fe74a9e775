//! Self-attention over packed tokens, Morph's kernel for `PackedAttention`: one sequence's
//! rows of the joint Q·K·V projection (`[len, 3 · hidden]`, the queries already scaled by
//! 1/√d) to its context rows (`[len, hidden]`), head by head, `softmax(q·kᵀ)·v` over that
//! sequence's tokens only. The standard graph spreads Q, K and V to the padded
//! `[batch, heads, len, d]` layout (Split, Gather, Reshape, Transpose), masks the padding with
//! a bias on the scores and gathers the context back; here no padding is computed, and a
//! text's context depends on its own tokens alone, whatever its neighbours.
//!
//! Each head's two products are written over SIMD vectors (`pulp`, which compiles them for
//! AVX-512, AVX2 or the build's baseline and picks one at run time), a block of [`QUERIES`]
//! queries at a time, so that their sums stay in registers: the head's keys are transposed
//! once into rows of its channels (the scores of a block are then a multiply-add of one
//! vector of keys per query and channel), its values copied into whole vectors. A general
//! matrix product spent more time choosing and packing than multiplying on a head's few
//! dozen tokens. The scores' product also keeps each row's maximum, and the context's divides
//! its rows by the softmax's sums, so the softmax between them is one pass over the scores,
//! written over fixed lanes so that it vectorises (`multiversion`: AVX-512, AVX2).

use multiversion::multiversion;
use pulp::{Arch, Simd, WithSimd};

use crate::kernels::exp_nonpositive;

/// Floats the softmax handles together (one AVX-512 register, two AVX2 ones), and what keys
/// and channels are padded to (a whole number of any SIMD width `pulp` picks).
const LANES: usize = 16;
/// Queries computed together: each vector of keys or values loaded serves this many of them.
const QUERIES: usize = 8;

/// One sequence's context for every head: `qkv` its `len` rows of `3 · hidden` (queries, keys,
/// values), `out` its `len` rows of `hidden` (none for a row of padding alone), on the widest
/// SIMD vectors the CPU has.
pub fn attend(qkv: &[f32], hidden: usize, heads: usize, out: &mut [f32]) {
    Arch::new().dispatch(Attend { qkv, hidden, heads, out });
}

/// [`attend`]'s operands, for `pulp` to run on one SIMD width.
struct Attend<'a> {
    qkv: &'a [f32],
    hidden: usize,
    heads: usize,
    out: &'a mut [f32],
}

impl WithSimd for Attend<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let Self { qkv, hidden, heads, out } = self;
        let d = hidden.checked_div(heads).unwrap_or(0);
        assert!(d > 0 && hidden == d * heads, "{heads} heads of {hidden}");
        let len = out.len() / hidden;
        assert_eq!((qkv.len(), out.len()), (3 * len * hidden, len * hidden), "rows of {hidden}");
        if len == 0 {
            return;
        }
        let head = Head::new(len, d, hidden);
        let mut buffers = head.buffers();
        for at in (0..hidden).step_by(d) {
            head.pack(qkv, at, &mut buffers);
            Scores { head, qkv, at, buffers: &mut buffers }.run(simd);
            let Buffers { scores, maxima, inverse_sums, .. } = &mut buffers;
            exponentials(&mut scores[..len * head.keys], head.keys, maxima, inverse_sums);
            Context { head, buffers: &buffers, out: &mut *out, at }.run(simd);
        }
    }
}

/// One head's shapes over a sequence, padded to whole blocks.
#[derive(Clone, Copy)]
struct Head {
    /// Tokens of the sequence.
    len: usize,
    /// Channels of the head.
    d: usize,
    /// Channels of a token's context row (a third of its projection's row).
    hidden: usize,
    /// Keys, in whole [`LANES`].
    keys: usize,
    /// Channels, in whole [`LANES`].
    channels: usize,
}

/// A head's keys and values laid out for the products, and its scores.
struct Buffers {
    /// The keys transposed: `[d][keys]`.
    keys: Vec<f32>,
    /// The values: `[len][channels]`.
    values: Vec<f32>,
    /// Per key: 0, or −∞ for the padding after the last, which its score takes.
    padding: Vec<f32>,
    /// `[len in whole blocks of QUERIES][keys]`: the scores, then their exponentials.
    scores: Vec<f32>,
    /// Per query (in whole blocks): its largest score.
    maxima: Vec<f32>,
    /// Per query: 1 ÷ the sum of its exponentials.
    inverse_sums: Vec<f32>,
}

impl Head {
    fn new(len: usize, d: usize, hidden: usize) -> Self {
        Self { len, d, hidden, keys: len.next_multiple_of(LANES), channels: d.next_multiple_of(LANES) }
    }

    /// Zeroed buffers; what pads them stays zero from head to head.
    fn buffers(&self) -> Buffers {
        let queries = self.len.next_multiple_of(QUERIES);
        let padding = (0..self.keys).map(|j| if j < self.len { 0.0 } else { f32::NEG_INFINITY }).collect();
        Buffers {
            keys: vec![0.0; self.d * self.keys],
            values: vec![0.0; self.len * self.channels],
            padding,
            scores: vec![0.0; queries * self.keys],
            maxima: vec![0.0; queries],
            inverse_sums: vec![0.0; self.len],
        }
    }

    /// The keys and values of the head at column `at` of `qkv`'s rows into `buffers`.
    fn pack(&self, qkv: &[f32], at: usize, buffers: &mut Buffers) {
        let (d, hidden) = (self.d, self.hidden);
        for (i, row) in qkv.chunks_exact(3 * hidden).enumerate() {
            for (c, &k) in row[hidden + at..][..d].iter().enumerate() {
                buffers.keys[c * self.keys + i] = k;
            }
            buffers.values[i * self.channels..][..d].copy_from_slice(&row[2 * hidden + at..][..d]);
        }
    }
}

/// `scores = q · kᵀ` for the head at column `at`, a block of queries by a vector of keys at a
/// time (the queries read where they lie in `qkv`), and each query's largest score.
struct Scores<'a> {
    head: Head,
    qkv: &'a [f32],
    at: usize,
    buffers: &'a mut Buffers,
}

impl Scores<'_> {
    #[inline(always)]
    fn run<S: Simd>(self, simd: S) {
        let Self { head, qkv, at, buffers: Buffers { keys, padding, scores, maxima, .. } } = self;
        let (d, vectors) = (head.d, head.keys / S::F32_LANES);
        let blocks = scores.chunks_exact_mut(QUERIES * head.keys).zip(maxima.chunks_exact_mut(QUERIES));
        for (block, (scores, maxima)) in blocks.enumerate() {
            // A last block's rows past the sequence repeat its last query (their scores unused).
            let queries: [&[f32]; QUERIES] = std::array::from_fn(|r| {
                let row = (block * QUERIES + r).min(head.len - 1);
                &qkv[row * 3 * head.hidden + at..][..d]
            });
            let mut largest = [simd.splat_f32s(f32::NEG_INFINITY); QUERIES];
            let mut tile = Tile { scores: &mut *scores, width: head.keys, vector: 0 };
            while S::F32_LANES >= LANES && tile.vector + PAIR <= vectors {
                let sums = product_tile::<S, PAIR>(simd, &queries, keys, head.keys, tile.vector);
                tile.keep_scores(simd, sums.as_flattened(), padding, &mut largest);
            }
            while tile.vector < vectors {
                let sums = product_tile::<S, 1>(simd, &queries, keys, head.keys, tile.vector);
                tile.keep_scores(simd, sums.as_flattened(), padding, &mut largest);
            }
            for (max, largest) in maxima.iter_mut().zip(largest) {
                *max = simd.reduce_max_f32s(largest);
            }
        }
    }
}

/// Vectors of keys or values a tile of the products spans where a vector holds [`LANES`]
/// floats (AVX-512, 32 registers): with [`QUERIES`] rows, 16 sums in registers, enough to keep
/// both of a core's multiply-add units busy. Narrower vectors (AVX2, 16 registers) take one,
/// so that the sums do not spill.
const PAIR: usize = 2;

/// Where a block's scores go: its rows of `width` keys, from key vector `vector` on.
struct Tile<'a> {
    scores: &'a mut [f32],
    width: usize,
    vector: usize,
}

impl Tile<'_> {
    /// Each row's `sums` (as many vectors each as there are of them per row) with the keys'
    /// padding added into the block's scores, and into each row's `largest`; on to the next
    /// vectors.
    #[inline(always)]
    fn keep_scores<S: Simd>(&mut self, simd: S, sums: &[S::f32s], padding: &[f32], largest: &mut [S::f32s]) {
        let n = sums.len() / QUERIES;
        let padding = &S::as_simd_f32s(padding).0[self.vector..][..n];
        let rows = self.scores.chunks_exact_mut(self.width).zip(largest).zip(sums.chunks_exact(n));
        for ((row, largest), sums) in rows {
            let row = &mut S::as_mut_simd_f32s(row).0[self.vector..][..n];
            for ((score, &sum), &padding) in row.iter_mut().zip(sums).zip(padding) {
                *score = simd.add_f32s(sum, padding);
                *largest = simd.max_f32s(*largest, *score);
            }
        }
        self.vector += n;
    }
}

/// Both products' tile: for each of `QUERIES` rows, `Σ_t rows[r][t] · vectors[t]`, where
/// `vectors[t]` is the `N` SIMD vectors from vector `vector` on of row `t` of `vectors` (rows of
/// `width`). The scores are the queries' channels times the keys' rows (one per channel); the
/// context, the exponentials (one per key) times the values' rows.
#[inline(always)]
fn product_tile<S: Simd, const N: usize>(
    simd: S,
    rows: &[&[f32]; QUERIES],
    vectors: &[f32],
    width: usize,
    vector: usize,
) -> [[S::f32s; N]; QUERIES] {
    let steps = rows[0].len();
    let mut sums = [[simd.splat_f32s(0.0); N]; QUERIES];
    for (t, row) in vectors.chunks_exact(width).take(steps).enumerate() {
        let row: &[S::f32s; N] = S::as_simd_f32s(row).0[vector..][..N].try_into().expect("N vectors");
        for (sums, rows) in sums.iter_mut().zip(rows) {
            let scalar = simd.splat_f32s(rows[t]);
            for (sum, &row) in sums.iter_mut().zip(row) {
                *sum = simd.mul_add_e_f32s(scalar, row, *sum);
            }
        }
    }
    sums
}

/// `context = softmax · v` for the head at column `at`: the exponentials times the values,
/// each row divided by its sum, into the head's columns of `out`'s rows.
struct Context<'a> {
    head: Head,
    buffers: &'a Buffers,
    out: &'a mut [f32],
    at: usize,
}

impl Context<'_> {
    #[inline(always)]
    fn run<S: Simd>(self, simd: S) {
        let Self { head, buffers: Buffers { values, scores, inverse_sums, .. }, out, at } = self;
        let vectors = head.d.div_ceil(S::F32_LANES);
        for (block, p) in scores.chunks_exact(QUERIES * head.keys).enumerate() {
            let first_row = block * QUERIES;
            let count = (head.len - first_row).min(QUERIES);
            let exponentials: [&[f32]; QUERIES] = std::array::from_fn(|r| &p[r * head.keys..][..head.len]);
            let inverse_sums = &inverse_sums[first_row..];
            let mut rows =
                ContextRows { out: &mut *out, head, at, first_row, count, inverse_sums, vector: 0 };
            while S::F32_LANES >= LANES && rows.vector + PAIR <= vectors {
                let context =
                    product_tile::<S, PAIR>(simd, &exponentials, values, head.channels, rows.vector);
                rows.keep_context(simd, context.as_flattened());
            }
            while rows.vector < vectors {
                let context = product_tile::<S, 1>(simd, &exponentials, values, head.channels, rows.vector);
                rows.keep_context(simd, context.as_flattened());
            }
        }
    }
}

/// Where a block's context goes: the head's columns (from `at`) of its `count` rows of `out`
/// from `first_row` on, each divided by its sum of exponentials (`inverse_sums`, from `first_row` on),
/// from channel vector `vector` on.
struct ContextRows<'a> {
    out: &'a mut [f32],
    head: Head,
    at: usize,
    first_row: usize,
    count: usize,
    inverse_sums: &'a [f32],
    vector: usize,
}

impl ContextRows<'_> {
    /// Each row's `context` (as many vectors each as there are of them per row) into the
    /// output; on to the next vectors.
    #[inline(always)]
    fn keep_context<S: Simd>(&mut self, simd: S, context: &[S::f32s]) {
        let n = context.len() / QUERIES;
        let Head { hidden, d, .. } = self.head;
        let rows = context.chunks_exact(n).zip(self.inverse_sums).take(self.count);
        for (r, (context, &inverse_sum)) in rows.enumerate() {
            let out = &mut self.out[(self.first_row + r) * hidden + self.at..][..d];
            let scale = simd.splat_f32s(inverse_sum);
            for (v, &context) in context.iter().enumerate() {
                let first = (self.vector + v) * S::F32_LANES;
                let columns = (d - first).min(S::F32_LANES);
                simd.partial_store_f32s(&mut out[first..][..columns], simd.mul_f32s(context, scale));
            }
        }
        self.vector += n;
    }
}

/// Each row of `scores` (rows of `width`, a whole number of [`LANES`], the padding's scores
/// −∞) to the exponentials of its scores less its maximum, and 1 ÷ their sum into
/// `inverse_sums`: summed lane by lane as they are made, then the lanes in halves.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx2+fma", "x86_64+avx2+fma"))]
fn exponentials(scores: &mut [f32], width: usize, maxima: &[f32], inverse_sums: &mut [f32]) {
    for ((row, &max), inverse_sum) in scores.chunks_exact_mut(width).zip(maxima).zip(inverse_sums) {
        let mut lanes = [0f32; LANES];
        for block in row.chunks_exact_mut(LANES) {
            for (lane, s) in lanes.iter_mut().zip(block) {
                *s = exp_nonpositive(*s - max);
                *lane += *s;
            }
        }
        let mut half = LANES / 2;
        while half > 0 {
            for i in 0..half {
                lanes[i] += lanes[i + half];
            }
            half /= 2;
        }
        *inverse_sum = 1.0 / lanes[0];
    }
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
        // Lengths around the query block (8) and a vector of keys (16), past several pairs of
        // vectors and an odd count of them (130 tokens: 9 vectors of 16 keys); heads of 20, 32,
        // 48 and 64 channels (partial, paired and odd vectors of context); one to twelve heads.
        let shapes = [
            (0, 64, 2),
            (1, 64, 2),
            (3, 64, 2),
            (4, 96, 3),
            (8, 60, 3),
            (9, 48, 1),
            (17, 64, 2),
            (33, 64, 1),
            (50, 384, 12),
            (130, 60, 3),
        ];
        for (len, hidden, heads) in shapes {
            let qkv = projections(len, hidden, len);
            let want = reference(&qkv, hidden, heads);
            for (simd, out) in each_width(|width| {
                let mut out = vec![f32::NAN; len * hidden];
                width.run(Attend { qkv: &qkv, hidden, heads, out: &mut out });
                out
            }) {
                for (i, (got, want)) in out.iter().zip(&want).enumerate() {
                    assert!(
                        (got - want).abs() < 2e-5,
                        "{simd}: {len} x {hidden}/{heads}: value {i} {got} vs {want}"
                    );
                }
            }
        }
    }

    /// A SIMD width `pulp` runs on: the CPU's widest (as served), AVX2 where the CPU has it,
    /// and one float at a time.
    #[derive(Clone, Copy)]
    enum Width {
        Widest,
        #[cfg(target_arch = "x86_64")]
        Avx2(pulp::x86::V3),
        Scalar,
    }

    impl Width {
        fn run(self, attend: Attend<'_>) {
            match self {
                Width::Widest => Arch::new().dispatch(attend),
                #[cfg(target_arch = "x86_64")]
                Width::Avx2(simd) => Simd::vectorize(simd, attend),
                Width::Scalar => attend.with_simd(pulp::Scalar::new()),
            }
        }
    }

    /// `f`'s result on each width this CPU runs, named.
    fn each_width<T>(f: impl Fn(Width) -> T) -> Vec<(&'static str, T)> {
        let mut widths = vec![("widest", Width::Widest), ("scalar", Width::Scalar)];
        #[cfg(target_arch = "x86_64")]
        widths.extend(pulp::x86::V3::try_new().map(|simd| ("avx2", Width::Avx2(simd))));
        widths.into_iter().map(|(name, width)| (name, f(width))).collect()
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
