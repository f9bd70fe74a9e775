//! `TileProduct` where the CPU has no AMX tiles but has AVX-512 VNNI (AMD Zen 4 and later,
//! Intel since Ice Lake): the same packed weights, read a tile row at a time. A tile row holds,
//! for 16 columns, 4 consecutive k each, which is what one `vpdpbusd` pairs with 4 bytes of an
//! activation row broadcast across its lanes. A micro-block of [`ROWS`] rows × [`COLUMN_BLOCKS`]
//! · 16 columns keeps its int32 sums in 16 registers while k runs, so each weight vector loaded
//! serves 4 rows; the weights of a column panel (24 KiB at k = 384) stay in L1 across the
//! block's 32 rows. The sums are scaled back in registers, as [`super::tiles`]'s rows are.

#![allow(unsafe_code)]

use super::tiles::{BlockRows, Operands, packed_dims};

/// Rows of one micro-block.
const ROWS: usize = 4;
/// Column blocks (16 columns each) of one micro-block; a panel of two where fewer are left
/// (`packed_dims` pads the columns to whole pairs).
const COLUMN_BLOCKS: usize = 4;
/// Columns of one packed column block, and int32 lanes of one register.
const LANES: usize = 16;
/// Bytes of one tile row: 4 k for each of 16 columns.
const STEP_BYTES: usize = 4 * LANES;

/// Whether this CPU has the AVX-512 instructions the kernel uses.
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// [`super::tiles::multiply_block`] on AVX-512 VNNI, for operands it has checked. Call only
/// where [`available`].
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
pub(super) fn multiply_rows(operands: Operands<'_>, rows: BlockRows, out: &mut [f32]) {
    assert!(available(), "VNNI products on a CPU without AVX-512 VNNI");
    // SAFETY: the CPU has the target's features (asserted above).
    #[cfg(target_arch = "x86_64")]
    unsafe {
        kernel::multiply_rows(operands, rows, out)
    }
}

#[cfg(target_arch = "x86_64")]
mod kernel {
    use std::arch::x86_64::{
        __m512, __m512i, __mmask16, _mm512_cvtepi32_ps, _mm512_dpbusd_epi32, _mm512_fmadd_ps,
        _mm512_loadu_si512, _mm512_mask_storeu_ps, _mm512_maskz_loadu_epi32, _mm512_maskz_loadu_ps,
        _mm512_mul_ps, _mm512_set1_epi32, _mm512_set1_ps, _mm512_setzero_si512, _mm512_sub_epi32,
    };

    use super::*;

    /// Where a micro-block's sums go, and what scales them back ([`super::multiply_rows`]).
    struct Epilogue<'a> {
        /// The output from the micro-block's first row and the panel's first column, rows `n`
        /// apart.
        out: *mut f32,
        n: usize,
        /// Rows (≤ [`ROWS`]) and columns of the micro-block that are outputs.
        rows: usize,
        columns: usize,
        /// From the panel's first column.
        scale: &'a [f32],
        zero_sums: &'a [i32],
        /// The micro-block's rows' peaks, and the bias from the panel's first column.
        rescale: Option<(&'a [f32], Option<&'a [f32]>)>,
    }

    /// See [`super::multiply_rows`].
    ///
    /// # Safety
    /// The CPU has AVX-512 F, BW and VNNI.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn multiply_rows(operands: Operands<'_>, rows: BlockRows, out: &mut [f32]) {
        let Operands { q, k, weights: w, rescale } = operands;
        let n = w.scale.len();
        let [n_padded, k_padded] = packed_dims(k, n);
        let (first_row, rows) = (rows.first, rows.count);
        // Each step reads 4 bytes of a row: rows whose k is not a multiple of 4, or too few
        // for the last micro-block, are copied into zero-padded rows first.
        let steps = k.div_ceil(4);
        let padded;
        let (inputs, stride) = if k.is_multiple_of(4) && rows.is_multiple_of(ROWS) {
            (&q[first_row * k..][..rows * k], k)
        } else {
            let mut copy = vec![0u8; rows.next_multiple_of(ROWS) * 4 * steps];
            for (to, from) in copy.chunks_exact_mut(4 * steps).zip(q[first_row * k..].chunks_exact(k)) {
                to[..k].copy_from_slice(from);
            }
            padded = copy;
            (&padded[..], 4 * steps)
        };
        let column_blocks = n_padded / LANES;
        let block_bytes = k_padded * LANES;
        let mut first_block = 0;
        while first_block < column_blocks {
            let panel = (column_blocks - first_block).min(COLUMN_BLOCKS);
            let weights = &w.packed[first_block * block_bytes..][..panel * block_bytes];
            let first_column = first_block * LANES;
            let columns = (panel * LANES).min(n - first_column);
            for micro in (0..rows).step_by(ROWS) {
                let row = first_row + micro;
                let epilogue = Epilogue {
                    out: out[micro * n + first_column..].as_mut_ptr(),
                    n,
                    rows: (rows - micro).min(ROWS),
                    columns,
                    scale: &w.scale[first_column..],
                    zero_sums: &w.zero_sums[first_column..],
                    rescale: rescale.map(|r| (&r.peaks[row..], r.bias.map(|b| &b[first_column..]))),
                };
                let a = &inputs[micro * stride..];
                // SAFETY: `a` holds ROWS rows of `stride` ≥ 4 · steps bytes (the last copied
                // with padding), `weights` `panel` column blocks of `k_padded / 4` ≥ steps rows,
                // and `epilogue` the output's rows and columns that exist.
                unsafe {
                    match panel {
                        COLUMN_BLOCKS => {
                            micro_block::<COLUMN_BLOCKS>(a, stride, weights, block_bytes, steps, &epilogue)
                        }
                        _ => micro_block::<2>(a, stride, weights, block_bytes, steps, &epilogue),
                    }
                }
            }
            first_block += panel;
        }
    }

    /// [`ROWS`] rows of `a` (`stride` bytes apart) times `PANEL` packed column blocks of `b`
    /// (`block_bytes` apart) over `steps` steps of 4 k, summed in registers, then scaled back
    /// into the output as `tiles::write_row` does, to the bit.
    ///
    /// # Safety
    /// AVX-512 F and VNNI; `a` readable for `ROWS` rows of `4 · steps` bytes at `stride`, `b`
    /// for `PANEL` blocks of `steps` tile rows; `epilogue.out` writable for its rows of `n` at
    /// its columns, which its scales (and bias and peaks) cover.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn micro_block<const PANEL: usize>(
        a: &[u8],
        stride: usize,
        b: &[i8],
        block_bytes: usize,
        steps: usize,
        epilogue: &Epilogue<'_>,
    ) {
        debug_assert!(a.len() >= (ROWS - 1) * stride + 4 * steps);
        debug_assert!(b.len() >= (PANEL - 1) * block_bytes + steps * STEP_BYTES);
        let (a, b) = (a.as_ptr(), b.as_ptr());
        let mut acc = [[_mm512_setzero_si512(); PANEL]; ROWS];
        for step in 0..steps {
            // SAFETY: within the bounds the caller guarantees (asserted above in debug builds).
            unsafe {
                let weights: [__m512i; PANEL] = std::array::from_fn(|j| {
                    _mm512_loadu_si512(b.add(j * block_bytes + step * STEP_BYTES).cast())
                });
                for (r, acc) in acc.iter_mut().enumerate() {
                    let four = a.add(r * stride + 4 * step).cast::<i32>().read_unaligned();
                    let inputs = _mm512_set1_epi32(four);
                    for (acc, &weights) in acc.iter_mut().zip(&weights) {
                        *acc = _mm512_dpbusd_epi32(*acc, inputs, weights);
                    }
                }
            }
        }
        let e = epilogue;
        for j in 0..PANEL {
            let lanes = e.columns.saturating_sub(j * LANES).min(LANES);
            if lanes == 0 {
                break;
            }
            let mask: __mmask16 = ((1u32 << lanes) - 1) as __mmask16;
            // SAFETY: the masked lanes are the columns that exist (the caller's contract).
            unsafe {
                let zero_sums = _mm512_maskz_loadu_epi32(mask, e.zero_sums.as_ptr().add(j * LANES));
                let scale = _mm512_maskz_loadu_ps(mask, e.scale.as_ptr().add(j * LANES));
                let bias = e
                    .rescale
                    .and_then(|(_, bias)| bias)
                    .map(|b| _mm512_maskz_loadu_ps(mask, b.as_ptr().add(j * LANES)));
                for (r, acc) in acc.iter().enumerate().take(e.rows) {
                    let exact: __m512 =
                        _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc[j], zero_sums)), scale);
                    let y = match (e.rescale, bias) {
                        (None, _) => exact,
                        (Some((peaks, _)), None) => _mm512_mul_ps(exact, _mm512_set1_ps(peaks[r])),
                        (Some((peaks, _)), Some(bias)) => {
                            _mm512_fmadd_ps(exact, _mm512_set1_ps(peaks[r]), bias)
                        }
                    };
                    _mm512_mask_storeu_ps(e.out.add(r * e.n + j * LANES), mask, y);
                }
            }
        }
    }
}
