//! ONNX Runtime operators Morph adds to every session it builds (domain [`DOMAIN`]): the two
//! per-row steps of an int8 product ([`rows`]), each one pass where the standard operators took
//! several. Their nodes are written by [`crate::onnx::precision::row_quantized_product`].
//!
//! - `RowQuantize(x [.., k], channel_scale [k]?, copies [e] int64?) → (q [.., k + e] uint8,
//!   peak [.., 1])`: each row times the channel scales, quantised on its own peak, then the
//!   quantised values of channels `copies` appended (an outlier channel split into copies).
//! - `RowRescale(y [.., n], peak [.., 1], bias [n]?) → [.., n]`: `y · peak + bias`.

pub mod rows;

use ort::operator::{
    ComputeContext, Kernel, KernelContext, Operator, OperatorDomain, OperatorInput, OperatorOutput,
};
use ort::value::TensorElementType;

/// The operator set Morph's graphs name for these operators.
pub const DOMAIN: &str = "morph";
pub const ROW_QUANTIZE: &str = "RowQuantize";
pub const ROW_RESCALE: &str = "RowRescale";

/// The operators, to register with a session (`SessionBuilder::with_operators`).
pub fn operators() -> ort::Result<OperatorDomain> {
    OperatorDomain::new(DOMAIN)?.add(RowQuantize)?.add(RowRescale)
}

struct RowQuantize;
struct RowRescale;

/// The kernel of both operators: the function that computes it from its inputs.
struct Rows(fn(&ComputeContext) -> ort::Result<()>);

impl Kernel for Rows {
    fn compute(&mut self, ctx: &ComputeContext) -> ort::Result<()> {
        (self.0)(ctx)
    }
}

impl Operator for RowQuantize {
    type Kernel<'attr> = Rows;

    fn name(&self) -> &str {
        ROW_QUANTIZE
    }

    fn inputs(&self) -> impl IntoIterator<Item = OperatorInput> {
        [
            OperatorInput::required(TensorElementType::Float32),
            OperatorInput::optional(TensorElementType::Float32),
            OperatorInput::optional(TensorElementType::Int64),
        ]
    }

    fn outputs(&self) -> impl IntoIterator<Item = OperatorOutput> {
        [
            OperatorOutput::required(TensorElementType::Uint8),
            OperatorOutput::required(TensorElementType::Float32),
        ]
    }

    fn create_kernel<'attr>(&self, _: &KernelContext<'attr>) -> ort::Result<Rows> {
        Ok(Rows(quantize))
    }
}

impl Operator for RowRescale {
    type Kernel<'attr> = Rows;

    fn name(&self) -> &str {
        ROW_RESCALE
    }

    fn inputs(&self) -> impl IntoIterator<Item = OperatorInput> {
        [
            OperatorInput::required(TensorElementType::Float32),
            OperatorInput::required(TensorElementType::Float32),
            OperatorInput::optional(TensorElementType::Float32),
        ]
    }

    fn outputs(&self) -> impl IntoIterator<Item = OperatorOutput> {
        [OperatorOutput::required(TensorElementType::Float32)]
    }

    fn create_kernel<'attr>(&self, _: &KernelContext<'attr>) -> ort::Result<Rows> {
        Ok(Rows(rescale))
    }
}

fn missing(what: &str) -> ort::Error {
    ort::Error::new(format!("{DOMAIN} operator: no {what}"))
}

/// `RowQuantize`'s computation (see the module's documentation).
fn quantize(ctx: &ComputeContext) -> ort::Result<()> {
    let x = ctx.input(0)?.ok_or_else(|| missing("input x"))?;
    let (shape, x) = x.try_extract_tensor::<f32>()?;
    let width = *shape.last().ok_or_else(|| missing("row dimension"))? as usize;
    let scale = ctx.input(1)?;
    let scale = scale.as_ref().map(|s| s.try_extract_tensor::<f32>()).transpose()?.map(|(_, s)| s);
    let copies = ctx.input(2)?;
    let copies =
        copies.as_ref().map(|c| c.try_extract_tensor::<i64>()).transpose()?.map_or(&[][..], |(_, c)| c);
    if scale.is_some_and(|s| s.len() != width) || copies.iter().any(|&c| c < 0 || c as usize >= width) {
        return Err(ort::Error::new(format!(
            "{ROW_QUANTIZE}: channel scales or copies do not fit rows of {width}"
        )));
    }
    let widened = width + copies.len();
    let mut q_shape = shape.to_vec();
    *q_shape.last_mut().expect("a row dimension") = widened as i64;
    let mut peak_shape = shape.to_vec();
    *peak_shape.last_mut().expect("a row dimension") = 1;
    let mut q = ctx.output(0, q_shape)?.ok_or_else(|| missing("output q"))?;
    let mut peaks = ctx.output(1, peak_shape)?.ok_or_else(|| missing("output peak"))?;
    let (_, q) = q.try_extract_tensor_mut::<u8>()?;
    let (_, peaks) = peaks.try_extract_tensor_mut::<f32>()?;
    if width == 0 {
        peaks.fill(0.0);
        return Ok(());
    }
    for ((x, q), peak) in x.chunks_exact(width).zip(q.chunks_exact_mut(widened)).zip(peaks.iter_mut()) {
        let (row, extra) = q.split_at_mut(width);
        *peak = rows::quantize_row(x, scale, row);
        for (e, &c) in extra.iter_mut().zip(copies) {
            *e = row[c as usize];
        }
    }
    Ok(())
}

/// `RowRescale`'s computation (see the module's documentation).
fn rescale(ctx: &ComputeContext) -> ort::Result<()> {
    let y = ctx.input(0)?.ok_or_else(|| missing("input y"))?;
    let (shape, y) = y.try_extract_tensor::<f32>()?;
    let width = *shape.last().ok_or_else(|| missing("row dimension"))? as usize;
    let peaks = ctx.input(1)?.ok_or_else(|| missing("input peak"))?;
    let (_, peaks) = peaks.try_extract_tensor::<f32>()?;
    let bias = ctx.input(2)?;
    let bias = bias.as_ref().map(|b| b.try_extract_tensor::<f32>()).transpose()?.map(|(_, b)| b);
    if bias.is_some_and(|b| b.len() != width) || (width > 0 && peaks.len() != y.len() / width) {
        return Err(ort::Error::new(format!("{ROW_RESCALE}: peaks or bias do not fit rows of {width}")));
    }
    let mut out = ctx.output(0, shape.to_vec())?.ok_or_else(|| missing("output"))?;
    let (_, out) = out.try_extract_tensor_mut::<f32>()?;
    if width == 0 {
        return Ok(());
    }
    for ((y, out), &peak) in y.chunks_exact(width).zip(out.chunks_exact_mut(width)).zip(peaks) {
        rows::rescale_row(y, peak, bias, out);
    }
    Ok(())
}
