//! ONNX Runtime operators Morph adds to every session it builds (domain [`DOMAIN`]): the
//! per-row steps of int8 products ([`rows`]), each one pass where the standard operators took
//! several, and, where the CPU has AMX or AVX-512 VNNI, the products themselves ([`tiles`],
//! [`vnni`]). Their nodes are written by [`crate::onnx::precision`].
//!
//! - `RowQuantize(x [.., k], channel_scale [k]?, copies [e] int64?) → (q [.., k + e] uint8,
//!   peak [.., 1])`: each row times the channel scales, quantised on its own peak, then the
//!   quantised values of channels `copies` appended (an outlier channel split into copies).
//! - `RowRescale(y [.., n], peak [.., 1], bias [n]?) → [.., n]`: `y · peak + bias`.
//! - `RowRescaleNorm(y [.., n], peak [.., 1], bias [n], residual [.., n], gamma [n], beta [n],
//!   epsilon [1]) → [.., n]`: `LayerNormalization(y · peak + bias + residual)`, a block's output.
//! - `GeluRowQuantize(y [.., k], peak [.., 1], bias [k], channel_scale [k]?, copies [e] int64?)
//!   → (q [.., k + e] uint8, peak [.., 1])`: `RowQuantize(gelu(y · peak + bias))`, the
//!   feed-forward block's middle, with no fp32 tensor between its two products.
//! - `TileProduct(q [.., k] uint8, w int8 packed, scale [n], zero_sums [n] int32, peak [.., 1]?,
//!   bias [n]?) → [.., n]`: the int8 product on AMX tiles, or AVX-512 VNNI without them
//!   ([`tiles::engine`]), in the units `MatMulIntegerToFloat` gives, or scaled back as
//!   `RowRescale` where `peak` is given.
//! - `PackedAttention(qkv [tokens, 3 · hidden], lengths [batch] int64, heads [1] int64) →
//!   [tokens, hidden]`: self-attention over packed tokens ([`attention`]), the sequences' rows
//!   one after another, `lengths` of them each.

pub mod attention;
pub mod rows;
pub mod tiles;
pub mod vnni;

use std::sync::{Mutex, PoisonError};

use ort::operator::{
    ComputeContext, Kernel, KernelContext, Operator, OperatorDomain, OperatorInput, OperatorOutput,
};
use ort::value::TensorElementType::{self, Float32, Int8, Int32, Int64, Uint8};

/// The operator set Morph's graphs name for these operators.
pub const DOMAIN: &str = "morph";
pub const ROW_QUANTIZE: &str = "RowQuantize";
pub const ROW_RESCALE: &str = "RowRescale";
pub const ROW_RESCALE_NORM: &str = "RowRescaleNorm";
pub const GELU_ROW_QUANTIZE: &str = "GeluRowQuantize";
pub const TILE_PRODUCT: &str = "TileProduct";
pub const PACKED_ATTENTION: &str = "PackedAttention";

/// The operators, to register with a session (`SessionBuilder::with_operators`).
pub fn operators() -> ort::Result<OperatorDomain> {
    OperatorDomain::new(DOMAIN)?
        .add(ROW_QUANTIZE_OP)?
        .add(ROW_RESCALE_OP)?
        .add(ROW_RESCALE_NORM_OP)?
        .add(GELU_ROW_QUANTIZE_OP)?
        .add(TILE_PRODUCT_OP)?
        .add(PACKED_ATTENTION_OP)
}

/// Whether an operator's input must be given.
#[derive(Clone, Copy)]
enum Given {
    Always,
    Optionally,
}

/// One of the operators: its name, inputs, outputs and the function that computes it.
struct RowOperator {
    name: &'static str,
    inputs: &'static [(TensorElementType, Given)],
    outputs: &'static [TensorElementType],
    compute: fn(&ComputeContext) -> ort::Result<()>,
}

const ROW_QUANTIZE_OP: RowOperator = RowOperator {
    name: ROW_QUANTIZE,
    inputs: &[(Float32, Given::Always), (Float32, Given::Optionally), (Int64, Given::Optionally)],
    outputs: &[Uint8, Float32],
    compute: quantize,
};

const ROW_RESCALE_OP: RowOperator = RowOperator {
    name: ROW_RESCALE,
    inputs: &[(Float32, Given::Always), (Float32, Given::Always), (Float32, Given::Optionally)],
    outputs: &[Float32],
    compute: rescale,
};

const ROW_RESCALE_NORM_OP: RowOperator = RowOperator {
    name: ROW_RESCALE_NORM,
    inputs: &[(Float32, Given::Always); 7],
    outputs: &[Float32],
    compute: rescale_norm,
};

const GELU_ROW_QUANTIZE_OP: RowOperator = RowOperator {
    name: GELU_ROW_QUANTIZE,
    inputs: &[
        (Float32, Given::Always),
        (Float32, Given::Always),
        (Float32, Given::Always),
        (Float32, Given::Optionally),
        (Int64, Given::Optionally),
    ],
    outputs: &[Uint8, Float32],
    compute: gelu_quantize,
};

const TILE_PRODUCT_OP: RowOperator = RowOperator {
    name: TILE_PRODUCT,
    inputs: &[
        (Uint8, Given::Always),
        (Int8, Given::Always),
        (Float32, Given::Always),
        (Int32, Given::Always),
        (Float32, Given::Optionally),
        (Float32, Given::Optionally),
    ],
    outputs: &[Float32],
    compute: tile_product,
};

const PACKED_ATTENTION_OP: RowOperator = RowOperator {
    name: PACKED_ATTENTION,
    inputs: &[(Float32, Given::Always), (Int64, Given::Always), (Int64, Given::Always)],
    outputs: &[Float32],
    compute: packed_attention,
};

/// The kernel of every operator: the function that computes it from its inputs.
struct Rows(fn(&ComputeContext) -> ort::Result<()>);

impl Kernel for Rows {
    fn compute(&mut self, ctx: &ComputeContext) -> ort::Result<()> {
        (self.0)(ctx)
    }
}

impl Operator for RowOperator {
    type Kernel<'attr> = Rows;

    fn name(&self) -> &str {
        self.name
    }

    fn inputs(&self) -> impl IntoIterator<Item = OperatorInput> {
        self.inputs.iter().map(|&(elem, given)| match given {
            Given::Always => OperatorInput::required(elem),
            Given::Optionally => OperatorInput::optional(elem),
        })
    }

    fn outputs(&self) -> impl IntoIterator<Item = OperatorOutput> {
        self.outputs.iter().map(|&elem| OperatorOutput::required(elem))
    }

    fn create_kernel<'attr>(&self, _: &KernelContext<'attr>) -> ort::Result<Rows> {
        Ok(Rows(self.compute))
    }
}

fn missing(what: &str) -> ort::Error {
    ort::Error::new(format!("{DOMAIN} operator: no {what}"))
}

/// `RowQuantize`'s computation (see the module's documentation).
fn quantize(ctx: &ComputeContext) -> ort::Result<()> {
    let x = ctx.input(0)?.ok_or_else(|| missing("input x"))?;
    let (shape, x) = x.try_extract_tensor::<f32>()?;
    write_quantized(ctx, ROW_QUANTIZE, shape, 1, |row, scale, q| {
        rows::quantize_row(&x[row * q.len()..][..q.len()], scale, q)
    })
}

/// `GeluRowQuantize`'s computation (see the module's documentation).
fn gelu_quantize(ctx: &ComputeContext) -> ort::Result<()> {
    let y = ctx.input(0)?.ok_or_else(|| missing("input y"))?;
    let (shape, y) = y.try_extract_tensor::<f32>()?;
    let width = *shape.last().ok_or_else(|| missing("row dimension"))? as usize;
    let peaks = ctx.input(1)?.ok_or_else(|| missing("input peak"))?;
    let (_, peaks) = peaks.try_extract_tensor::<f32>()?;
    let bias = ctx.input(2)?.ok_or_else(|| missing("input bias"))?;
    let (_, bias) = bias.try_extract_tensor::<f32>()?;
    if bias.len() != width || (width > 0 && peaks.len() != y.len() / width) {
        return Err(ort::Error::new(format!(
            "{GELU_ROW_QUANTIZE}: peaks or bias do not fit rows of {width}"
        )));
    }
    let mut buffer = vec![0f32; width];
    write_quantized(ctx, GELU_ROW_QUANTIZE, shape, 3, |row, scale, q| {
        rows::gelu_quantize_row(&y[row * width..][..width], peaks[row], bias, scale, &mut buffer, q)
    })
}

/// The outputs of a quantising operator over rows of `shape` (its last dimension the row
/// width): each row's values and peak by `quantize_row(row index, channel scales, q)`, then the
/// copied channels appended. The channel scales and copies are the inputs at `channels` and
/// `channels + 1`.
fn write_quantized(
    ctx: &ComputeContext,
    op: &str,
    shape: &[i64],
    channels: usize,
    mut quantize_row: impl FnMut(usize, Option<&[f32]>, &mut [u8]) -> f32,
) -> ort::Result<()> {
    let width = *shape.last().ok_or_else(|| missing("row dimension"))? as usize;
    let scale = ctx.input(channels)?;
    let scale = scale.as_ref().map(|s| s.try_extract_tensor::<f32>()).transpose()?.map(|(_, s)| s);
    let copies = ctx.input(channels + 1)?;
    let copies =
        copies.as_ref().map(|c| c.try_extract_tensor::<i64>()).transpose()?.map_or(&[][..], |(_, c)| c);
    if scale.is_some_and(|s| s.len() != width) || copies.iter().any(|&c| c < 0 || c as usize >= width) {
        return Err(ort::Error::new(format!("{op}: channel scales or copies do not fit rows of {width}")));
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
    for (i, (q, peak)) in q.chunks_exact_mut(widened).zip(peaks.iter_mut()).enumerate() {
        let (row, extra) = q.split_at_mut(width);
        *peak = quantize_row(i, scale, row);
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

/// `RowRescaleNorm`'s computation (see the module's documentation).
fn rescale_norm(ctx: &ComputeContext) -> ort::Result<()> {
    const INPUTS: [&str; 7] = ["input y", "peak", "bias", "residual", "gamma", "beta", "epsilon"];
    let values = (0..INPUTS.len())
        .map(|i| ctx.input(i)?.ok_or_else(|| missing(INPUTS[i])))
        .collect::<ort::Result<Vec<_>>>()?;
    let tensors = values.iter().map(|v| v.try_extract_tensor::<f32>()).collect::<ort::Result<Vec<_>>>()?;
    let [(shape, y), (_, peaks), (_, bias), (_, residual), (_, gamma), (_, beta), (_, epsilon)] = tensors[..]
    else {
        unreachable!("{} inputs read", INPUTS.len())
    };
    let width = *shape.last().ok_or_else(|| missing("row dimension"))? as usize;
    if [bias.len(), gamma.len(), beta.len()] != [width; 3]
        || residual.len() != y.len()
        || epsilon.len() != 1
        || (width > 0 && peaks.len() != y.len() / width)
    {
        return Err(ort::Error::new(format!(
            "{ROW_RESCALE_NORM}: peaks, bias, residual, norm or epsilon do not fit rows of {width}"
        )));
    }
    let mut out = ctx.output(0, shape.to_vec())?.ok_or_else(|| missing("output"))?;
    let (_, out) = out.try_extract_tensor_mut::<f32>()?;
    if width == 0 {
        return Ok(());
    }
    let norm = rows::RowNorm { gamma, beta, epsilon: epsilon[0] };
    let rows = y.chunks_exact(width).zip(residual.chunks_exact(width)).zip(out.chunks_exact_mut(width));
    for (((y, residual), out), &peak) in rows.zip(peaks) {
        rows::rescale_norm_row(y, peak, bias, residual, &norm, out);
    }
    Ok(())
}

/// `TileProduct`'s computation (see the module's documentation).
fn tile_product(ctx: &ComputeContext) -> ort::Result<()> {
    let q = ctx.input(0)?.ok_or_else(|| missing("input q"))?;
    let (shape, q) = q.try_extract_tensor::<u8>()?;
    let k = *shape.last().ok_or_else(|| missing("row dimension"))? as usize;
    let packed = ctx.input(1)?.ok_or_else(|| missing("input w"))?;
    let (_, packed) = packed.try_extract_tensor::<i8>()?;
    let scale = ctx.input(2)?.ok_or_else(|| missing("input scale"))?;
    let (_, scale) = scale.try_extract_tensor::<f32>()?;
    let zero_sums = ctx.input(3)?.ok_or_else(|| missing("input zero_sums"))?;
    let (_, zero_sums) = zero_sums.try_extract_tensor::<i32>()?;
    let (peaks, bias) = (ctx.input(4)?, ctx.input(5)?);
    let peaks = peaks.as_ref().map(|p| p.try_extract_tensor::<f32>()).transpose()?.map(|(_, p)| p);
    let bias = bias.as_ref().map(|b| b.try_extract_tensor::<f32>()).transpose()?.map(|(_, b)| b);
    let n = scale.len();
    let rows = q.len().checked_div(k).unwrap_or(0);
    let [n_padded, k_padded] = tiles::packed_dims(k, n);
    if k == 0
        || packed.len() != n_padded * k_padded
        || zero_sums.len() != n
        || peaks.is_some_and(|p| p.len() != rows)
        || bias.is_some_and(|b| peaks.is_none() || b.len() != n)
    {
        return Err(ort::Error::new(format!(
            "{TILE_PRODUCT}: weights, sums, peaks or bias do not fit rows of {k} into {n} columns"
        )));
    }
    if !tiles::available() {
        return Err(ort::Error::new(format!(
            "{TILE_PRODUCT}: this CPU has neither AMX int8 tiles nor AVX-512 VNNI"
        )));
    }
    let mut out_shape = shape.to_vec();
    *out_shape.last_mut().expect("a row dimension") = n as i64;
    let mut out = ctx.output(0, out_shape)?.ok_or_else(|| missing("output"))?;
    let (_, out) = out.try_extract_tensor_mut::<f32>()?;
    let weights = tiles::TileWeights { packed, zero_sums, scale };
    let rescale = peaks.map(|peaks| tiles::Rescale { peaks, bias });
    // A block of rows per task, on the session's intra-op threads.
    let blocks: Vec<Mutex<&mut [f32]>> = out.chunks_mut(tiles::BLOCK * n.max(1)).map(Mutex::new).collect();
    ctx.par_for(blocks.len(), blocks.len(), |block| {
        let mut out = blocks[block].lock().unwrap_or_else(PoisonError::into_inner);
        tiles::multiply_block(tiles::Operands { q, k, weights, rescale }, block, &mut out);
    })
}

/// `PackedAttention`'s computation (see the module's documentation).
fn packed_attention(ctx: &ComputeContext) -> ort::Result<()> {
    let qkv = ctx.input(0)?.ok_or_else(|| missing("input qkv"))?;
    let (shape, qkv) = qkv.try_extract_tensor::<f32>()?;
    let lengths = ctx.input(1)?.ok_or_else(|| missing("input lengths"))?;
    let (_, lengths) = lengths.try_extract_tensor::<i64>()?;
    let heads = ctx.input(2)?.ok_or_else(|| missing("input heads"))?;
    let (_, heads) = heads.try_extract_tensor::<i64>()?;
    let width = match &shape[..] {
        [_, width] => *width as usize,
        _ => return Err(ort::Error::new(format!("{PACKED_ATTENTION}: qkv is not [tokens, 3 · hidden]"))),
    };
    let (hidden, tokens) = (width / 3, qkv.len().checked_div(width).unwrap_or(0));
    let heads = match heads {
        [heads] if *heads > 0 => *heads as usize,
        _ => return Err(ort::Error::new(format!("{PACKED_ATTENTION}: heads is not one positive count"))),
    };
    let head = hidden.checked_div(heads).unwrap_or(0);
    if width != 3 * hidden || head == 0 || head * heads != hidden {
        return Err(ort::Error::new(format!(
            "{PACKED_ATTENTION}: rows of {width} are not 3 × {heads} heads"
        )));
    }
    if lengths.iter().any(|&n| n < 0) || lengths.iter().sum::<i64>() != tokens as i64 {
        return Err(ort::Error::new(format!("{PACKED_ATTENTION}: lengths do not add up to {tokens} tokens")));
    }
    let mut out = ctx.output(0, vec![tokens as i64, hidden as i64])?.ok_or_else(|| missing("output"))?;
    let (_, mut out) = out.try_extract_tensor_mut::<f32>()?;
    // A sequence per task, on the session's intra-op threads.
    let mut sequences = Vec::with_capacity(lengths.len());
    let mut qkv = qkv;
    for &n in lengths {
        let n = n as usize;
        let (rows, rest) = qkv.split_at(n * width);
        let (context, others) = std::mem::take(&mut out).split_at_mut(n * hidden);
        sequences.push(Mutex::new((rows, context)));
        (qkv, out) = (rest, others);
    }
    ctx.par_for(sequences.len(), sequences.len(), |s| {
        let mut sequence = sequences[s].lock().unwrap_or_else(PoisonError::into_inner);
        let (rows, ref mut context) = *sequence;
        attention::attend(rows, hidden, heads, context);
    })
}
