//! The arithmetic of the graph's weight matrix products (`--dtype`): fp32, or int8 with
//! ONNX Runtime's `DynamicQuantizeMatMul` (activations quantised per call to uint8, weights to
//! int8 per output column, the product accumulated in int32 by MLAS's u8×s8 kernels, VNNI
//! where the CPU has it) for every weight product (Q/K/V, attention output, the feed-forward up
//! and down projections), each less its outlier input channels ([`super::outliers`]).
//! Attention's own products (Q·Kᵀ, P·V), the norms and the embeddings stay fp32.

use std::sync::Arc;

use super::outliers::Outliers;

/// The arithmetic of the weight matrix products.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    #[default]
    Fp32,
    Int8,
}

impl std::str::FromStr for Dtype {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "fp32" | "float32" => Ok(Self::Fp32),
            "int8" => Ok(Self::Int8),
            "bf16" | "bfloat16" => Err(
                "bf16: ONNX Runtime 1.31's CPU execution provider has no bfloat16 MatMul kernel (morph-benches' int8_graphs asks it for one), so Morph writes no bf16 graph; use int8 or fp32".into(),
            ),
            other => Err(format!("'{other}' is not a dtype: fp32 or int8")),
        }
    }
}

impl std::fmt::Display for Dtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Fp32 => "fp32",
            Self::Int8 => "int8",
        })
    }
}

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

/// `w` (`[in, out]`, row-major) quantised symmetrically per output column: the int8 values and
/// each column's scale (max |w| / 127; 1 for an all-zero column).
pub fn quantize_columns(w: &[f32], rows: usize, cols: usize) -> (Vec<i8>, Vec<f32>) {
    let mut scales = vec![0f32; cols];
    for row in w.chunks_exact(cols).take(rows) {
        for (s, x) in scales.iter_mut().zip(row) {
            *s = s.max(x.abs());
        }
    }
    scales.iter_mut().for_each(|s| *s = if *s > 0.0 { *s / 127.0 } else { 1.0 });
    let q = w
        .iter()
        .enumerate()
        .map(|(i, x)| (x / scales[i % cols]).round().clamp(-127.0, 127.0) as i8)
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
        let (q, scales) = quantize_columns(&w, 2, 3);
        assert_eq!(scales, vec![2.0 / 127.0, 0.5 / 127.0, 1.0]);
        assert_eq!(q, vec![127, -127, 0, -64, 64, 0]);
    }

    #[test]
    fn bf16_is_refused_in_one_line_that_says_why() {
        let err = "bf16".parse::<Dtype>().unwrap_err();
        assert!(err.contains("no bfloat16 MatMul kernel") && !err.contains('\n'), "{err}");
        assert_eq!("int8".parse::<Dtype>(), Ok(Dtype::Int8));
    }
}
