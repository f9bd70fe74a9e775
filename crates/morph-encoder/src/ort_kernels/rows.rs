//! The per-row arithmetic of int8 products (see [`crate::onnx::precision`]), one pass over a
//! row where ONNX Runtime's standard operators took six: a token row quantised to uint8 on its
//! own peak, a product's row scaled back by that peak with the bias added, and, between the
//! feed-forward block's two products, both at once with GELU between them, and after a block's
//! output product, the scaling back, the residual and the layer norm at once. Written over
//! fixed-width lanes so the compiler vectorises them, and compiled for AVX-512, AVX2 and the
//! build's baseline, the best the CPU has chosen at run time (`multiversion`).

use multiversion::multiversion;

use crate::kernels::{ROUND_MAGIC, gelu};

/// The steps either side of zero a row's peak |value| maps to: ±peak → ±127.
const ROW_STEPS: f32 = 127.0;
/// An activation row's quantisation step once divided by its own peak |value|.
pub const ROW_STEP: f32 = 1.0 / ROW_STEPS;
/// The uint8 zero point of a quantised row (MLAS's fast kernels take u8 activations and s8
/// weights): q = round(x / peak · 127) + 128, within 1..=255.
pub const ROW_ZERO_POINT: u8 = 128;
/// The least peak a row is divided by, so that an all-zero row stays zero.
const LEAST_PEAK: f32 = 1e-30;
/// Lanes the loops are written over (one AVX-512 register, two AVX2 ones).
const LANES: usize = 16;

/// Quantises one row: `x` times its channel `scale` (where outlier channels are split, else
/// all ones), divided by the row's peak |value| p, to uint8 in `q` (`x.len()` values); returns p.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx2+fma", "x86_64+avx2+fma"))]
pub fn quantize_row(x: &[f32], scale: Option<&[f32]>, q: &mut [u8]) -> f32 {
    quantize(x, scale, q)
}

/// [`quantize_row`]'s body, inlined into each of its callers' instruction sets.
#[inline(always)]
fn quantize(x: &[f32], scale: Option<&[f32]>, q: &mut [u8]) -> f32 {
    let peak = peak_of(x, scale);
    let to_steps = ROW_STEPS / peak;
    match scale {
        Some(scale) => x.iter().zip(scale).zip(q).for_each(|((v, s), q)| *q = to_step(v * s, to_steps)),
        None => x.iter().zip(q).for_each(|(v, q)| *q = to_step(*v, to_steps)),
    }
    peak
}

/// The largest |value| of `x` times `scale` (at least [`LEAST_PEAK`]), kept per lane so that it
/// vectorises.
#[inline(always)]
fn peak_of(x: &[f32], scale: Option<&[f32]>) -> f32 {
    let mut lanes = [LEAST_PEAK; LANES];
    let mut fold = |block: &[f32], scale: &[f32]| {
        for ((lane, v), s) in lanes.iter_mut().zip(block).zip(scale) {
            let v = (v * s).abs();
            *lane = if v > *lane { v } else { *lane };
        }
    };
    let blocks = x.chunks_exact(LANES);
    let tail = blocks.remainder();
    match scale {
        Some(scale) => {
            let scales = scale.chunks_exact(LANES);
            let tail_scale = scales.remainder();
            blocks.zip(scales).for_each(|(block, scale)| fold(block, scale));
            fold(tail, tail_scale);
        }
        None => {
            blocks.for_each(|block| fold(block, &[1.0; LANES]));
            fold(tail, &[1.0; LANES]);
        }
    }
    lanes.into_iter().fold(LEAST_PEAK, f32::max)
}

/// A value times `to_steps` (|v · to_steps| ≤ 127) to its uint8 step: moved by the zero point
/// and rounded half to even, as QuantizeLinear rounds. Adding 1.5·2²³ leaves the rounded
/// integer in the low mantissa bits, which avoids a float-to-integer conversion that does not
/// vectorise.
#[inline(always)]
fn to_step(v: f32, to_steps: f32) -> u8 {
    let shifted = v.mul_add(to_steps, f32::from(ROW_ZERO_POINT)).clamp(0.0, 255.0);
    ((shifted + ROUND_MAGIC).to_bits() & 0xff) as u8
}

/// `out = y · peak + bias` over one row of a product (`bias` as long as the row, if any).
#[multiversion(targets("x86_64+avx512f+avx512bw+avx2+fma", "x86_64+avx2+fma"))]
pub fn rescale_row(y: &[f32], peak: f32, bias: Option<&[f32]>, out: &mut [f32]) {
    let scaled = out.iter_mut().zip(y);
    match bias {
        Some(bias) => scaled.zip(bias).for_each(|((out, y), b)| *out = y.mul_add(peak, *b)),
        None => scaled.for_each(|(out, y)| *out = y * peak),
    }
}

/// A layer normalisation's weights: `(v − mean) / √(variance + epsilon) · gamma + beta` over a
/// row.
#[derive(Debug, Clone, Copy)]
pub struct RowNorm<'a> {
    pub gamma: &'a [f32],
    pub beta: &'a [f32],
    pub epsilon: f32,
}

/// A block's output row in one pass where the standard graph took three (`RowRescale`, `Add`,
/// `LayerNormalization`): a product's row `y` scaled back by its `peak`, the `bias` and the
/// `residual` row added, and the sum normalised by `norm` into `out` (the mean and the
/// variance taken in two passes over `out`, which stays in cache).
#[multiversion(targets("x86_64+avx512f+avx512bw+avx2+fma", "x86_64+avx2+fma"))]
pub fn rescale_norm_row(
    y: &[f32],
    peak: f32,
    bias: &[f32],
    residual: &[f32],
    norm: &RowNorm<'_>,
    out: &mut [f32],
) {
    out.iter_mut()
        .zip(y)
        .zip(bias)
        .zip(residual)
        .for_each(|(((out, y), b), r)| *out = y.mul_add(peak, *b) + r);
    let n = out.len().max(1) as f32;
    let mean = lane_sum(out, |v| v) / n;
    let variance = lane_sum(out, |v| (v - mean) * (v - mean)) / n;
    let scale = 1.0 / (variance + norm.epsilon).sqrt();
    out.iter_mut()
        .zip(norm.gamma)
        .zip(norm.beta)
        .for_each(|((v, g), b)| *v = ((*v - mean) * scale).mul_add(*g, *b));
}

/// The sum of `term` of each of `x`, kept per lane so that it vectorises.
#[inline(always)]
fn lane_sum(x: &[f32], term: impl Fn(f32) -> f32) -> f32 {
    let mut lanes = [0f32; LANES];
    let blocks = x.chunks_exact(LANES);
    let tail = blocks.remainder();
    blocks.for_each(|block| lanes.iter_mut().zip(block).for_each(|(lane, &v)| *lane += term(v)));
    lanes.iter_mut().zip(tail).for_each(|(lane, &v)| *lane += term(v));
    lanes.into_iter().sum()
}

/// The feed-forward block's middle in one pass per row: a row of the up projection's product
/// scaled back by its `peak` with the `bias` added, through GELU into `row` (as wide as `y`,
/// a buffer that stays in cache), then quantised for the down projection as [`quantize_row`]
/// does (its channel `scale`, into `q`); returns the new row's peak.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx2+fma", "x86_64+avx2+fma"))]
pub fn gelu_quantize_row(
    y: &[f32],
    peak: f32,
    bias: &[f32],
    scale: Option<&[f32]>,
    row: &mut [f32],
    q: &mut [u8],
) -> f32 {
    row.iter_mut().zip(y).zip(bias).for_each(|((out, y), b)| *out = gelu(y.mul_add(peak, *b)));
    quantize(row, scale, q)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The six standard operators the kernel replaces: ReduceMax/Min, Neg, Max, Div,
    /// QuantizeLinear (round half to even, saturate).
    fn reference(x: &[f32]) -> (Vec<u8>, f32) {
        let peak = x.iter().fold(LEAST_PEAK, |m, v| m.max(v.abs()));
        let q = x
            .iter()
            .map(|v| ((v / peak / ROW_STEP).round_ties_even() + 128.0).clamp(0.0, 255.0) as u8)
            .collect();
        (q, peak)
    }

    #[test]
    fn a_row_is_quantised_on_its_own_peak_as_quantize_linear_does() {
        // 37 values: two whole lane blocks and a tail, the peak (−9.5) in the tail.
        let x: Vec<f32> =
            (0..37).map(|i| if i == 35 { -9.5 } else { (i as f32 * 0.731).sin() * 4.0 }).collect();
        let mut q = vec![0u8; x.len()];
        let peak = quantize_row(&x, None, &mut q);
        let (want, want_peak) = reference(&x);
        assert_eq!(peak, want_peak);
        assert_eq!(q[35], 1, "the peak's sign maps to the bottom step");
        let off = q.iter().zip(&want).filter(|(a, b)| a != b).count();
        // x · (127 / p) and x / p / (1/127) may round a value on a half step apart.
        assert!(off <= 1, "{off} of {} values differ: {q:?} vs {want:?}", x.len());
        assert!(q.iter().zip(&want).all(|(a, b)| a.abs_diff(*b) <= 1));
    }

    #[test]
    fn channel_scales_apply_before_the_peak_and_zero_rows_stay_zero() {
        let (x, scale) = ([8.0, -1.2, 0.5], [0.25, 1.0, 1.0]);
        let mut q = [0u8; 3];
        assert_eq!(quantize_row(&x, Some(&scale), &mut q), 2.0);
        assert_eq!(q, [255, 52, 160]);
        let mut zeros = [7u8; 20];
        quantize_row(&[0.0; 20], None, &mut zeros);
        assert!(zeros.iter().all(|&q| q == ROW_ZERO_POINT));
    }

    #[test]
    fn a_row_is_scaled_back_by_its_peak_before_the_bias() {
        let mut out = [0.0; 3];
        rescale_row(&[1.0, -2.0, 0.5], 4.0, Some(&[0.5, 0.5, -1.0]), &mut out);
        assert_eq!(out, [4.5, -7.5, 1.0]);
        rescale_row(&[1.0, -2.0, 0.5], 2.0, None, &mut out);
        assert_eq!(out, [2.0, -4.0, 1.0]);
    }

    #[test]
    fn a_block_output_is_rescaled_added_to_its_residual_and_normalised() {
        // 37 values: two lane blocks and a tail; the reference in f64 as LayerNormalization
        // defines it.
        let y: Vec<f32> = (0..37).map(|i| (i as f32 * 0.377).cos() * 3.0).collect();
        let bias: Vec<f32> = (0..37).map(|i| (i as f32 - 18.0) / 20.0).collect();
        let residual: Vec<f32> = (0..37).map(|i| (i as f32 * 0.91).sin() + 2.0).collect();
        let gamma: Vec<f32> = (0..37).map(|i| 1.0 + i as f32 / 37.0).collect();
        let beta: Vec<f32> = (0..37).map(|i| (i % 5) as f32 * 0.1).collect();
        let (peak, epsilon) = (1.5, 1e-12);
        let mut out = vec![0.0; 37];
        rescale_norm_row(
            &y,
            peak,
            &bias,
            &residual,
            &RowNorm { gamma: &gamma, beta: &beta, epsilon },
            &mut out,
        );
        let v: Vec<f64> =
            (0..37).map(|i| f64::from(y[i]) * peak as f64 + f64::from(bias[i] + residual[i])).collect();
        let mean = v.iter().sum::<f64>() / 37.0;
        let variance = v.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 37.0;
        for (i, got) in out.iter().enumerate() {
            let want = (v[i] - mean) / (variance + f64::from(epsilon)).sqrt() * f64::from(gamma[i])
                + f64::from(beta[i]);
            assert!((f64::from(*got) - want).abs() < 1e-5, "value {i}: {got} vs {want}");
        }
    }

    #[test]
    fn the_feed_forward_middle_is_rescale_then_gelu_then_quantize() {
        // 37 values: two lane blocks and a tail; a channel scale halves every third channel.
        let y: Vec<f32> = (0..37).map(|i| (i as f32 * 0.377).cos() * 3.0).collect();
        let bias: Vec<f32> = (0..37).map(|i| (i as f32 - 18.0) / 20.0).collect();
        let scale: Vec<f32> = (0..37).map(|i| if i % 3 == 0 { 0.5 } else { 1.0 }).collect();
        let mut separate = vec![0.0; 37];
        rescale_row(&y, 1.5, Some(&bias), &mut separate);
        separate.iter_mut().for_each(|v| *v = gelu(*v));
        let mut want = vec![0u8; 37];
        let want_peak = quantize_row(&separate, Some(&scale), &mut want);
        let (mut row, mut q) = (vec![0.0; 37], vec![0u8; 37]);
        let peak = gelu_quantize_row(&y, 1.5, &bias, Some(&scale), &mut row, &mut q);
        assert_eq!(peak, want_peak);
        assert_eq!(row, separate);
        assert_eq!(q, want);
        assert!(q.iter().any(|&v| v < ROW_ZERO_POINT) && q.iter().any(|&v| v > ROW_ZERO_POINT));
    }
}
