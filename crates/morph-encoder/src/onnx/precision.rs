//! The arithmetic of the graph's weight matrix products (`--dtype`): fp32, or int8 for every
//! weight product (Q/K/V, attention output, the feed-forward up and down projections), each
//! less its outlier input channels ([`super::outliers`]): weights quantised to int8 per output
//! column (7 bits where the CPU has no int8 dot products: [`WeightSteps`]), and each
//! activation row (a token) quantised to uint8 on its own scale
//! ([`row_quantized_product`], in one pass by Morph's own operator), the product accumulated
//! in int32 by the [`IntegerKernel`] the host runs best: Morph's own on AMX tiles or AVX-512
//! VNNI, which also scales the rows back, or else ONNX Runtime's `MatMulIntegerToFloat`
//! (MLAS's kernels);
//! between the feed-forward block's two products one operator scales back, applies GELU and
//! quantises again ([`int8_feed_forward`]).
//! Attention's own products (Q·Kᵀ, P·V), the norms and the embeddings stay fp32.
//!
//! A scale per row, not per tensor, is what makes a text's vector independent of its
//! neighbours: `DynamicQuantizeMatMul`, used before, took one scale for the whole batch, so a
//! short text batched beside long ones was quantised on their range (cosine 0.991–0.994 to
//! itself alone).

use std::sync::Arc;

use super::builder::Builder;
use crate::ort_kernels::rows::{ROW_STEP, ROW_ZERO_POINT};
use crate::ort_kernels::tiles;
use crate::ort_kernels::{GELU_ROW_QUANTIZE, ROW_QUANTIZE, ROW_RESCALE, ROW_RESCALE_NORM, TILE_PRODUCT};

use super::outliers::Outliers;
pub use morph_core::Dtype;

/// What a graph's weight products compute in: [`Dtype`] with what int8 needs.
#[derive(Debug, Clone, PartialEq)]
pub enum Precision {
    Fp32,
    /// Int8, with each product's outlier input channels (calibrated on text) in fp32.
    Int8(Arc<Outliers>),
}

impl Precision {
    pub fn dtype(&self) -> Dtype {
        match self {
            Self::Fp32 => Dtype::Fp32,
            Self::Int8(_) => Dtype::Int8,
        }
    }
}

/// An int8 product's outlier input channels split into copies ([`super::outliers`]): the scale
/// of each input channel and the channels copied after the row, as graph constants.
pub(crate) struct ChannelSplit {
    pub scale: String,
    pub copies: String,
}

/// The kernel that multiplies quantised rows by int8 weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IntegerKernel {
    /// ONNX Runtime's `MatMulIntegerToFloat`, weights `[in, out]`; the rows scaled back by
    /// Morph's `RowRescale`.
    Mlas,
    /// Morph's `TileProduct` on AMX tiles, or AVX-512 VNNI without them ([`tiles`]), weights
    /// packed into the tiles' layout; it scales the rows back itself.
    Tiles,
}

/// The environment variable that chooses the [`IntegerKernel`] (`mlas` or `tiles`) instead of
/// the host's best.
pub const KERNEL_VARIABLE: &str = "MORPH_INT8_KERNEL";

impl IntegerKernel {
    /// The kernel [`KERNEL_VARIABLE`] names, else tiles where this process can use them, else
    /// ONNX Runtime's; an unknown name, or tiles on a CPU without them, is refused.
    pub fn for_host() -> Result<Self, String> {
        let tiles = tiles::available();
        match std::env::var(KERNEL_VARIABLE).as_deref() {
            Err(_) => Ok(if tiles { Self::Tiles } else { Self::Mlas }),
            Ok("mlas") => Ok(Self::Mlas),
            Ok("tiles") if tiles => Ok(Self::Tiles),
            Ok("tiles") => {
                Err(format!("{KERNEL_VARIABLE}=tiles: this CPU has neither AMX int8 tiles nor AVX-512 VNNI"))
            }
            Ok(other) => Err(format!("{KERNEL_VARIABLE}={other}: not a kernel (mlas or tiles)")),
        }
    }
}

/// What runs the products, as a log names it: `tiles (AVX-512 VNNI)`, `tiles (AMX)` or `mlas`.
impl std::fmt::Display for IntegerKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self, tiles::engine()) {
            (Self::Tiles, Some(tiles::TileEngine::Amx)) => f.write_str("tiles (AMX)"),
            (Self::Tiles, _) => f.write_str("tiles (AVX-512 VNNI)"),
            (Self::Mlas, _) => f.write_str("mlas"),
        }
    }
}

/// One int8 weight product's constants in the graph: `w` int8 (`[in (+ copies), out]` for
/// MLAS, packed for tiles), the scale per output column (for tiles times the rows' step),
/// the tiles' zero-point sums, and the input channels split, if any.
pub(crate) struct Int8Weights {
    pub w: String,
    pub scale: String,
    pub zero_sums: Option<String>,
    pub split: Option<ChannelSplit>,
}

/// A weight product's int8 constants before any graph holds them: made once per model and
/// kernel ([`super::prepared`]), copied into each graph that takes the product.
#[derive(Debug)]
pub(crate) struct QuantizedWeights {
    kernel: IntegerKernel,
    /// The weights' shape as stored: `[k, n]`, or the tiles' layout.
    dims: [usize; 2],
    values: Vec<i8>,
    /// Per output column: its step (times the row step, where the tiles scale rows back).
    scale: Vec<f32>,
    /// Per output column, what the tiles subtract for the rows' zero point.
    zero_sums: Option<Vec<i32>>,
}

impl QuantizedWeights {
    /// `w` (`[k, n]`, its outlier channels already split) quantised per output column and laid
    /// out for `kernel`.
    pub(crate) fn of(w: &[f32], [k, n]: [usize; 2], kernel: IntegerKernel) -> Self {
        let (q, scales) = quantize_columns(w, k, n, WeightSteps::for_host());
        match kernel {
            IntegerKernel::Mlas => Self { kernel, dims: [k, n], values: q, scale: scales, zero_sums: None },
            IntegerKernel::Tiles => {
                let (packed, zero_sums) = tiles::pack(&q, k, n);
                // The step times the column's scale, the product MLAS forms from its two scales.
                let scale = scales.iter().map(|s| ROW_STEP * s).collect();
                let dims = tiles::packed_dims(k, n);
                Self { kernel, dims, values: packed, scale, zero_sums: Some(zero_sums) }
            }
        }
    }

    /// Copies of them in `g`, named from `name`, with the product's channel `split`.
    pub(crate) fn add(&self, g: &mut Builder, name: &str, split: Option<ChannelSplit>) -> Int8Weights {
        let stem = match self.kernel {
            IntegerKernel::Mlas => "weight_int8",
            IntegerKernel::Tiles => "weight_tiles",
        };
        Int8Weights {
            w: g.i8s(&format!("{name}.{stem}"), &self.dims, self.values.clone()),
            scale: g.f32s(&format!("{name}.weight_scale"), &[self.scale.len()], self.scale.clone()),
            zero_sums: self
                .zero_sums
                .as_ref()
                .map(|sums| g.i32s(&format!("{name}.zero_sums"), &[sums.len()], sums.clone())),
            split,
        }
    }
}

/// Rows of a product's input quantised to uint8, each on its own peak |value| p.
struct QuantizedRows {
    q: String,
    peak: String,
}

/// `x · w (+ bias)` in int8: each row of `x` (any leading dimensions) is divided by its own
/// peak |value| p, quantised to uint8, and its int32 product scaled back by p, so a row's
/// result depends on that row alone:
/// y = p · (s_x · s_w · (q_x − 128) · q_w) + bias. The row steps are Morph's own operators
/// ([`crate::ort_kernels`]), the product ONNX Runtime's or Morph's ([`IntegerKernel`]).
pub(crate) fn row_quantized_product(g: &mut Builder, x: &str, w: &Int8Weights, bias: Option<&str>) -> String {
    let rows = quantize_rows(g, x, w.split.as_ref());
    integer_product(g, &rows, w, Units::Rescaled { bias })
}

/// A block's output, `LayerNormalization(x · w + bias + residual)`, in int8: the product as in
/// [`row_quantized_product`], its rows scaled back, the residual added and normalised in one
/// pass (`RowRescaleNorm`).
pub(crate) fn row_quantized_output(
    g: &mut Builder,
    x: &str,
    w: &Int8Weights,
    bias: &str,
    then: &ResidualNorm,
) -> String {
    let rows = quantize_rows(g, x, w.split.as_ref());
    integer_product(g, &rows, w, Units::Normed { bias, then })
}

/// What follows a block's output product: its residual added and the sum layer-normalised
/// (the graph's names of the residual, the norm's weights and its epsilon).
pub(crate) struct ResidualNorm {
    pub residual: String,
    pub gamma: String,
    pub beta: String,
    pub epsilon: String,
}

/// The feed-forward block `gelu(x · up + up_bias) · down + down_bias` in int8, as two
/// [`row_quantized_product`]s whose middle (scale back, bias, GELU, quantise for the down
/// projection) is one pass per row, `GeluRowQuantize`: no fp32 tensor of the block's inner
/// width is written between the products.
pub(crate) fn int8_feed_forward(
    g: &mut Builder,
    x: &str,
    (up, up_bias): (&Int8Weights, &str),
    (down, down_bias): (&Int8Weights, &str),
    then: &ResidualNorm,
) -> String {
    let rows = quantize_rows(g, x, up.split.as_ref());
    let inner = integer_product(g, &rows, up, Units::OfPeak);
    let mut inputs = vec![inner.as_str(), &rows.peak, up_bias];
    if let Some(split) = &down.split {
        inputs.extend([split.scale.as_str(), &split.copies]);
    }
    let [q, peak] = g.morph_op(GELU_ROW_QUANTIZE, &inputs);
    let inner = QuantizedRows { q, peak };
    integer_product(g, &inner, down, Units::Normed { bias: down_bias, then })
}

/// `RowQuantize`: each row of `x` (times its channel scales, its outlier channels copied
/// after it) on its own peak.
fn quantize_rows(g: &mut Builder, x: &str, split: Option<&ChannelSplit>) -> QuantizedRows {
    let inputs = match split {
        Some(split) => vec![x, &split.scale, &split.copies],
        None => vec![x],
    };
    let [q, peak] = g.morph_op(ROW_QUANTIZE, &inputs);
    QuantizedRows { q, peak }
}

/// The units an integer product's rows are left in.
#[derive(Clone, Copy)]
enum Units<'a> {
    /// Of each row's peak (the next operator scales them back).
    OfPeak,
    /// The input's: scaled back by each row's peak, the bias added.
    Rescaled { bias: Option<&'a str> },
    /// A block's output: scaled back, the bias and the residual added, normalised.
    Normed { bias: &'a str, then: &'a ResidualNorm },
}

/// The product of quantised rows and int8 weights, in `units`.
fn integer_product(g: &mut Builder, rows: &QuantizedRows, w: &Int8Weights, units: Units<'_>) -> String {
    if let (Some(zero_sums), Units::Rescaled { bias }) = (&w.zero_sums, units) {
        // The tiles scale their rows back themselves.
        let inputs = [rows.q.as_str(), &w.w, &w.scale, zero_sums, &rows.peak].into_iter().chain(bias);
        let [y] = g.morph_op(TILE_PRODUCT, &inputs.collect::<Vec<_>>());
        return y;
    }
    let product = match &w.zero_sums {
        Some(zero_sums) => {
            let [y] = g.morph_op(TILE_PRODUCT, &[&rows.q, &w.w, &w.scale, zero_sums]);
            y
        }
        None => {
            let (step, zero) = (g.scalar(ROW_STEP), g.u8_scalar(ROW_ZERO_POINT));
            // Inputs: A, B, a_scale, b_scale, a_zero_point (b symmetric: no zero point).
            g.contrib_op("MatMulIntegerToFloat", &[&rows.q, &w.w, &step, &w.scale, &zero])
        }
    };
    match units {
        Units::OfPeak => product,
        Units::Rescaled { bias } => {
            let inputs =
                [&product, &rows.peak].into_iter().map(String::as_str).chain(bias).collect::<Vec<_>>();
            let [y] = g.morph_op(ROW_RESCALE, &inputs);
            y
        }
        Units::Normed { bias, then } => {
            let ResidualNorm { residual, gamma, beta, epsilon } = then;
            let [y] =
                g.morph_op(ROW_RESCALE_NORM, &[&product, &rows.peak, bias, residual, gamma, beta, epsilon]);
            y
        }
    }
}

/// The steps either side of zero a weight column's largest |value| maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightSteps {
    /// ±127: where the CPU's int8 products accumulate in 32 bits (VNNI, AMX, other arches).
    Full = 127,
    /// ±63, as ONNX Runtime's `reduce_range`: where they add pairs of u8·s8 products in 16
    /// bits (x86 without VNNI), so that 2 · 255 · 63 stays below 32,767 and nothing saturates.
    Reduced = 63,
}

impl WeightSteps {
    /// The steps this host's int8 products can take without saturating.
    pub fn for_host() -> Self {
        if morph_engine::host::int8_pairs_saturate() { Self::Reduced } else { Self::Full }
    }
}

/// `w` (`[in, out]`, row-major) quantised symmetrically per output column: the int8 values and
/// each column's scale (max |w| / `steps`; 1 for an all-zero column).
pub fn quantize_columns(w: &[f32], rows: usize, cols: usize, steps: WeightSteps) -> (Vec<i8>, Vec<f32>) {
    let steps = f32::from(steps as u8);
    let mut scales = vec![0f32; cols];
    for row in w.chunks_exact(cols).take(rows) {
        for (s, x) in scales.iter_mut().zip(row) {
            *s = s.max(x.abs());
        }
    }
    scales.iter_mut().for_each(|s| *s = if *s > 0.0 { *s / steps } else { 1.0 });
    let q = w
        .iter()
        .enumerate()
        .map(|(i, x)| (x / scales[i % cols]).round().clamp(-steps, steps) as i8)
        .collect();
    (q, scales)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_scaled_to_their_own_largest_value() {
        // Two rows, three columns: column maxima 2.0, 0.5 and 0 (all zero).
        let w = [2.0, -0.5, 0.0, -1.0, 0.25, 0.0];
        let (q, scales) = quantize_columns(&w, 2, 3, WeightSteps::Full);
        assert_eq!(scales, vec![2.0 / 127.0, 0.5 / 127.0, 1.0]);
        assert_eq!(q, vec![127, -127, 0, -64, 64, 0]);
        let (q, scales) = quantize_columns(&w, 2, 3, WeightSteps::Reduced);
        assert_eq!(scales, vec![2.0 / 63.0, 0.5 / 63.0, 1.0]);
        assert_eq!(q[..3], [63, -63, 0], "each column's largest value on the last step");
        assert!(q.iter().all(|v| v.abs() <= 63), "7 bits: {q:?}");
    }

    #[test]
    fn bf16_is_refused_in_one_line_that_says_why() {
        let err = "bf16".parse::<Dtype>().unwrap_err();
        assert!(err.contains("no bfloat16 MatMul kernel") && !err.contains('\n'), "{err}");
        assert_eq!("int8".parse::<Dtype>(), Ok(Dtype::Int8));
    }
}
