//! One matrix product as an ONNX model, to measure ONNX Runtime's own kernels on this CPU
//! (`morph-benches`' `int8_graphs`): `y = a · b + bias` with `a` `[m, k]` the input and `b`
//! `[k, n]` and `bias` `[n]` constants, in fp32 (MatMul, Add), int8 (each row on its own scale,
//! as [`super::precision`] writes it, the bias added as the row is scaled back) or bf16
//! (MatMul on bfloat16 inputs, `b` an input too, no bias).

use super::builder::Builder;
use super::precision::{IntegerKernel, QuantizedWeights, row_quantized_product};
use super::proto::{DataType, Dim, ValueInfo};

/// The arithmetic of the product.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Product {
    Fp32,
    /// Int8 on the kernel given.
    Int8(IntegerKernel),
    Bf16,
}

/// Input `a`, and for bf16 input `b`; output `y`.
pub const A: &str = "a";
pub const B: &str = "b";
const BIAS: &str = "bias";
pub const Y: &str = "y";

/// The serialised model of `[m, k] · [k, n] + [n]` in `product`'s arithmetic; `b`'s values are
/// a fixed pattern in ±1, the bias's in ±0.5.
pub fn product_model(m: usize, k: usize, n: usize, product: Product) -> Vec<u8> {
    let mut g = Builder::new("morph-product");
    let elem = if product == Product::Bf16 { DataType::BFloat16 } else { DataType::Float };
    let info = |name: &str, dims: [usize; 2]| ValueInfo {
        name: name.into(),
        elem,
        dims: dims.iter().map(|&d| Dim::Fixed(d as i64)).collect(),
    };
    g.input(info(A, [m, k]));
    let values: Vec<f32> = (0..k * n).map(|i| ((i * 37 % 101) as f32 / 50.0) - 1.0).collect();
    let bias: Vec<f32> = (0..n).map(|c| (c * 3 % 8) as f32 / 8.0 - 0.5).collect();
    let y = match product {
        Product::Fp32 => {
            let (b, bias) = (g.f32s(B, &[k, n], values), g.f32s(BIAS, &[n], bias));
            let y = g.op("MatMul", &[A, &b], vec![]);
            g.op("Add", &[&y, &bias], vec![])
        }
        Product::Int8(kernel) => {
            let w = QuantizedWeights::of(&values, [k, n], kernel).add(&mut g, B, None);
            let bias = g.f32s(BIAS, &[n], bias);
            row_quantized_product(&mut g, A, &w, Some(&bias))
        }
        Product::Bf16 => {
            g.input(info(B, [k, n]));
            g.op("MatMul", &[A, B], vec![])
        }
    };
    g.name_output(&y, Y);
    g.output(info(Y, [m, n]));
    g.finish().to_model_bytes()
}
