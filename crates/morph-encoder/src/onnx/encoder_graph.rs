//! The ONNX graph of a BERT-family encoder, written from its checkpoint: embeddings, masked
//! multi-head self-attention, erf-GELU feed-forward, post-layer norms, pooling. It computes
//! what [`crate::bert::BertModel`] computes, in the op patterns ONNX Runtime's optimiser
//! fuses (GELU, LayerNormalization, MatMul + bias).
//!
//! A [`GraphSpec`] chooses the shape (every dimension fixed, or free), the layer range (a
//! pipeline stage: a graph that does not start at layer 0 takes hidden states in, one that
//! does not end at the last layer hands hidden states out), trained prompt tokens inserted
//! after `[CLS]`, token merging between attention and feed-forward in every layer (ToMe's
//! bipartite soft matching, as OTAS places it), and the output. Between the layers the
//! padding is removed ([`super::packing`]) unless an adaptation reshapes the sequences.

use std::ops::Range;

use candle_core::Tensor;

use super::builder::Builder;
use super::outliers::{Outliers, Product, Site};
use super::precision::{
    ChannelSplit, Int8Weights, IntegerKernel, Precision, ResidualNorm, int8_feed_forward,
    row_quantized_output, row_quantized_product,
};
use super::prepared::{LinearWeights, PreparedProducts};
use super::proto::{Attr, DataType, Dim, Graph, ValueInfo};
use super::writer::{Tokens, Writer};
use crate::architecture::{RELATIVE_BIAS, relative_buckets};
use crate::checkpoint::Checkpoint;
use crate::ort_kernels::PACKED_ATTENTION;
use crate::pooling::Pooling;
use morph_core::PromptMode;
use morph_engine::EngineError;

/// Token ids `[batch, len]`, int64 (graphs starting at layer 0).
pub const INPUT_IDS: &str = "input_ids";
/// 1 for real tokens, 0 for padding, `[batch, len]`, int64 (every graph).
pub const ATTENTION_MASK: &str = "attention_mask";
/// Hidden states `[batch, len, hidden]` coming in (graphs starting past layer 0).
pub const HIDDEN_IN: &str = "hidden_in";
/// Each row's deep prompts `[batch, layers, p, hidden]` ([`GraphSpec::deep_prompts`]).
pub const PROMPT_IN: &str = "prompt_in";
/// Hidden states `[batch, len, hidden]` going out ([`GraphOutput::Hidden`]).
pub const HIDDEN_OUT: &str = "last_hidden_state";
/// Pooled vectors `[batch, hidden]`, unnormalised ([`GraphOutput::Pooled`]); named as in
/// sentence-transformers' ONNX exports.
pub const POOLED: &str = "sentence_embedding";

/// Additive attention bias of a padded key: it weighs e^−30 ≈ 1e−13 of what its score would
/// weigh unmasked, so 512 padded keys scoring up to 6 above a row's best real key add less to
/// the row's sum than fp32 resolves, and `exp` of the masked score stays a normal float (no
/// underflow) unless it scores 57 below. A bias as large as [`super::writer::MASKED`] makes the same Softmax
/// 4–8× slower on Intel cores (ONNX Runtime's `exp` of a result that underflows fp32 takes a
/// slow path; `docs/serving.md`).
/// The graph's initialiser holding it is named from [`PADDED_KEY_BIAS_STEM`], so a tool can rewrite it.
const PADDED_KEY_BIAS: f32 = -30.0;
/// The stem of the initialiser holding −[`PADDED_KEY_BIAS`], for a tool that rewrites it.
const PADDED_KEY_BIAS_STEM: &str = "padded_key_bias";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphOutput {
    /// One vector per sequence (needs the graph to end at the last layer).
    Pooled(Pooling),
    /// The hidden states after the last layer of the range.
    Hidden,
    /// Int8 calibration: for each weight product of each layer of the range, the largest
    /// |value| of each input channel over the batch (`[in]`, named by [`input_max`]).
    InputMaxima,
}

/// The name of the product at `site`'s output in a [`GraphOutput::InputMaxima`] graph.
pub fn input_max(site: Site) -> String {
    format!("input_max.{}.{}", site.layer, site.product.name())
}

#[derive(Debug, Clone, PartialEq)]
pub struct GraphSpec {
    /// `(batch, len)` with every dimension fixed, or `None` for free `batch` and `sequence`.
    pub shape: Option<(u32, u32)>,
    /// Encoder layers computed, `0..num_hidden_layers` for the whole model.
    pub layers: Range<usize>,
    /// Prompt tokens: input embeddings (`hidden` floats each) inserted after `[CLS]`, before
    /// position embeddings are added; they take part in attention and mean pooling. The
    /// sequence the layers see is `len + prompt.len()` long (stages past layer 0 take that
    /// length and its mask).
    pub prompt: Vec<Vec<f32>>,
    /// Tokens merged per layer (OTAS's γ < 0): after each layer's attention the `merge` most
    /// similar pairs (cosine of keys, alternate tokens matched, `[CLS]` kept) become their
    /// size-weighted mean, attention then weighs a token by log(size) (ToMe's proportional
    /// attention) and mean pooling by size. Needs a pooled output.
    pub merge: usize,
    /// Deep prompts (OTAS γ > 0): `p` tokens per layer taken from the graph input
    /// [`PROMPT_IN`], each row its own (so one session serves a batch mixing tasks), inserted
    /// after `[CLS]` before every layer as the mode says (see
    /// [`crate::bert::BertModel::forward_prompted`], which this computes). Prompts are not
    /// pooled. Needs the whole model and a pooled output.
    pub deep_prompts: Option<(usize, PromptMode)>,
    /// Pruning once (Morph's own): `(k, percent)` drops that share of the tokens after layer k
    /// of the range, keeping those its attention looked at most. Needs a pooled output.
    pub prune: Option<(usize, u8)>,
    pub output: GraphOutput,
    /// The arithmetic of the weight matrix products.
    pub precision: Precision,
    /// Whether the padding is removed between the layers ([`super::packing`]): where no
    /// adaptation reshapes the sequences (merging, pruning, deep prompts) and the output is
    /// not [`GraphOutput::InputMaxima`]. Kept only to measure what removing it saves.
    pub remove_padding: bool,
}

impl GraphSpec {
    /// The whole model, pooled, at one shape.
    pub fn pooled(shape: Option<(u32, u32)>, pooling: Pooling, layers: usize) -> Self {
        let output = GraphOutput::Pooled(pooling);
        Self {
            shape,
            layers: 0..layers,
            prompt: Vec::new(),
            merge: 0,
            deep_prompts: None,
            prune: None,
            output,
            precision: Precision::Fp32,
            remove_padding: true,
        }
    }
}

/// Writes the graph `spec` describes for `checkpoint`.
pub fn encoder_graph(checkpoint: &Checkpoint, spec: &GraphSpec) -> Result<Graph, EngineError> {
    encoder_graph_reusing(checkpoint, spec, &PreparedProducts::default())
}

/// Writes the graph `spec` describes for `checkpoint`, its int8 products taken from `products`
/// (the same checkpoint's), prepared there the first time.
pub fn encoder_graph_reusing(
    checkpoint: &Checkpoint,
    spec: &GraphSpec,
    products: &PreparedProducts,
) -> Result<Graph, EngineError> {
    let cfg = &checkpoint.config;
    let bad = |detail: String| Err(EngineError::Load(format!("ONNX graph: {detail}")));
    if spec.layers.start >= spec.layers.end || spec.layers.end > cfg.num_hidden_layers {
        return bad(format!("layers {:?} outside 0..{}", spec.layers, cfg.num_hidden_layers));
    }
    if cfg.hidden_act != "gelu" {
        return bad(format!("hidden_act '{}' is not supported (only 'gelu')", cfg.hidden_act));
    }
    if spec.merge > 0 && !matches!(spec.output, GraphOutput::Pooled(_)) {
        return bad("token merging needs a pooled output".into());
    }
    if let Some((p, _)) = spec.deep_prompts
        && (p == 0
            || spec.merge > 0
            || !spec.prompt.is_empty()
            || spec.layers != (0..cfg.num_hidden_layers)
            || !matches!(spec.output, GraphOutput::Pooled(_)))
    {
        return bad(
            "deep prompts need p > 0, the whole model, a pooled output, and no other adaptation".into()
        );
    }
    if let Some((k, percent)) = spec.prune
        && (k == 0
            || k >= spec.layers.len()
            || !(1..100).contains(&percent)
            || spec.merge > 0
            || spec.deep_prompts.is_some()
            || !matches!(spec.output, GraphOutput::Pooled(_)))
    {
        return bad(format!(
            "pruning {percent}% after layer {k}: needs 0 < k < layers, 1..99%, a pooled output, and no other adaptation"
        ));
    }
    if let Precision::Int8(outliers) = &spec.precision
        && outliers.layers() != cfg.num_hidden_layers
    {
        return bad(format!(
            "int8 outlier channels calibrated for {} layers, the model has {}",
            outliers.layers(),
            cfg.num_hidden_layers
        ));
    }
    if spec.output == GraphOutput::InputMaxima && spec.precision != Precision::Fp32 {
        return bad(
            "input maxima are measured on the fp32 graph (int8 has no fp32 down-projection input)".into()
        );
    }
    let prompted = spec.prompt.len();
    if prompted > 0 && spec.layers.start != 0 {
        return bad("prompt tokens are inserted by the embeddings (layers from 0)".into());
    }
    if spec.prompt.iter().any(|v| v.len() != cfg.hidden_size) {
        return bad(format!("prompt vectors must have {} values", cfg.hidden_size));
    }
    if let Some((_, len)) = spec.shape
        && len as usize + prompted > cfg.max_position_embeddings
    {
        return bad(format!(
            "length {len} + {prompted} prompt tokens beyond {}",
            cfg.max_position_embeddings
        ));
    }
    let (batch, len, inner) = match spec.shape {
        Some((b, l)) => {
            (Dim::Fixed(b.into()), Dim::Fixed(l.into()), Dim::Fixed(i64::from(l) + prompted as i64))
        }
        None if prompted > 0 => (Dim::Free("batch"), Dim::Free("sequence"), Dim::Free("prompted_sequence")),
        None => (Dim::Free("batch"), Dim::Free("sequence"), Dim::Free("sequence")),
    };
    if let Some((_, len)) = spec.shape {
        let mut tokens = len as usize + prompted;
        for _ in spec.layers.clone().filter(|_| spec.merge > 0) {
            if spec.merge + 1 > tokens.div_ceil(2) {
                return bad(format!("cannot merge {} of {tokens} tokens in one layer", spec.merge));
            }
            tokens -= spec.merge;
        }
    }
    let hidden = Dim::Fixed(cfg.hidden_size as i64);
    let mut g = Writer {
        g: Builder::new("morph-encoder"),
        ckpt: checkpoint,
        products,
        relative: None,
        precision: spec.precision.clone(),
        kernel: IntegerKernel::for_host().map_err(EngineError::Load)?,
        tokens: Tokens::Padded,
    };
    let packed = spec.remove_padding
        && spec.merge == 0
        && spec.deep_prompts.is_none()
        && spec.prune.is_none()
        && spec.output != GraphOutput::InputMaxima;
    let tensor = |name: &str, elem, dims: &[&Dim]| ValueInfo {
        name: name.to_string(),
        elem,
        dims: dims.iter().map(|d| (*d).clone()).collect(),
    };
    g.g.input(tensor(ATTENTION_MASK, DataType::Int64, &[&batch, &len]));
    let mask = g.g.op("Cast", &[ATTENTION_MASK], vec![("to", Attr::Int(DataType::Float as i64))]);
    let (mut x, mask) = if spec.layers.start == 0 {
        g.g.input(tensor(INPUT_IDS, DataType::Int64, &[&batch, &len]));
        g.embeddings(&spec.prompt, mask)?
    } else {
        g.g.input(tensor(HIDDEN_IN, DataType::Float, &[&batch, &len, &hidden]));
        (HIDDEN_IN.to_string(), mask)
    };
    if packed {
        g.tokens = g.packed_tokens(&mask, cfg.hidden_size);
    }
    x = g.pack(&x);
    if spec.layers.start == 0 {
        x = g.layer_norm(&x, "embeddings.LayerNorm")?;
    }
    // Token sizes: 1 for a real token, 0 for padding, what a merged token absorbed.
    let mut sizes = mask;
    // What pooling weighs: the sizes, less any prompts.
    let mut pooled_weights = None;
    let mut bias = g.attention_bias(&sizes, false)?;
    if let Some((p, _)) = spec.deep_prompts {
        let (layers, p) = (Dim::Fixed(spec.layers.len() as i64), Dim::Fixed(p as i64));
        g.g.input(tensor(PROMPT_IN, DataType::Float, &[&batch, &layers, &p, &hidden]));
    }
    // Each layer's product inputs, for calibration.
    let mut product_inputs = Vec::new();
    for layer in spec.layers.clone() {
        if let Some((p, mode)) = spec.deep_prompts {
            let replaced = if mode == PromptMode::Replace && layer > 0 { p } else { 0 };
            let weights = pooled_weights.take().unwrap_or_else(|| sizes.clone());
            let inserted = g.insert_prompts(layer, p, replaced, &x, &sizes, &weights)?;
            (x, sizes) = (inserted.0, inserted.1);
            pooled_weights = Some(inserted.2);
            bias = g.attention_bias(&sizes, false)?;
        }
        let step = g.layer(layer, &x, &sizes, &bias, spec.merge)?;
        (x, sizes) = (step.hidden, step.sizes);
        let probs = step.probs;
        product_inputs.push((layer, step.product_inputs));
        if spec.merge > 0 {
            bias = g.attention_bias(&sizes, true)?;
        }
        if let Some((k, percent)) = spec.prune
            && layer + 1 == spec.layers.start + k
        {
            let probs = probs.expect("pruning keeps the padding");
            (x, sizes) = g.prune_tokens(&x, &sizes, &probs, percent);
            bias = g.attention_bias(&sizes, false)?;
        }
    }
    match spec.output {
        GraphOutput::Hidden => {
            let x = g.unpack(&x);
            g.g.name_output(&x, HIDDEN_OUT);
            g.g.output(tensor(HIDDEN_OUT, DataType::Float, &[&batch, &inner, &hidden]));
        }
        GraphOutput::Pooled(pooling) => {
            let x = g.unpack(&x);
            let pooled = g.pool(pooling, &x, pooled_weights.as_deref().unwrap_or(&sizes));
            g.g.name_output(&pooled, POOLED);
            g.g.output(tensor(POOLED, DataType::Float, &[&batch, &hidden]));
        }
        GraphOutput::InputMaxima => {
            for (layer, inputs) in product_inputs {
                for (product, input) in Product::ALL.into_iter().zip(inputs) {
                    let input = input.expect("every product's input: fp32, checked above");
                    let width =
                        if product == Product::Down { cfg.intermediate_size } else { cfg.hidden_size };
                    let magnitude = g.g.op("Abs", &[&input], vec![]);
                    let attrs = vec![("axes", Attr::Ints(vec![0, 1])), ("keepdims", Attr::Int(0))];
                    let maxima = g.g.op("ReduceMax", &[&magnitude], attrs);
                    let name = input_max(Site { layer, product });
                    g.g.name_output(&maxima, &name);
                    g.g.output(tensor(&name, DataType::Float, &[&Dim::Fixed(width as i64)]));
                }
            }
        }
    }
    Ok(g.g.finish())
}

/// What one encoder layer hands on.
struct LayerOut {
    hidden: String,
    /// The token sizes after the layer (changed by merging).
    sizes: String,
    /// The attention probabilities, where attention ran padded (as it does where pruning follows).
    probs: Option<String>,
    /// Each weight product's input, in [`Product::ALL`] order (the down projection's only in
    /// fp32: int8 writes none).
    product_inputs: [Option<String>; 4],
}

/// What attention in the padded layout hands on besides the context, for pruning and merging.
struct PaddedAttention {
    /// The attention probabilities `[batch, heads, len, len]`.
    probs: String,
    /// The keys `[batch, len, hidden]`.
    keys: String,
}

/// A tensor's values, row-major.
fn values(t: &Tensor) -> Result<Vec<f32>, EngineError> {
    Ok(t.to_dtype(candle_core::DType::F32)?.flatten_all()?.to_vec1::<f32>()?)
}

impl Writer<'_> {
    fn weight(&mut self, name: &str) -> Result<String, EngineError> {
        let t = self.ckpt.get(name)?;
        let dims = t.dims().to_vec();
        let data = values(t)?;
        Ok(self.g.f32s(name, &dims, data))
    }

    /// `x · Wᵀ + b` for the Hugging Face `Linear` at `prefix` (weight `[out, in]`), the
    /// product at `site`.
    fn linear(&mut self, x: &str, prefix: &str, site: Site) -> Result<String, EngineError> {
        self.product(x, prefix, site, |w| w.linear_weights(prefix))
    }

    /// The Hugging Face `Linear` at `prefix`, its weight transposed to `[in, out]`.
    fn linear_weights(&self, prefix: &str) -> Result<LinearWeights, EngineError> {
        let w = self.ckpt.get(&format!("{prefix}.weight"))?;
        let b = self.ckpt.get(&format!("{prefix}.bias"))?;
        let wt = w.t()?.contiguous()?;
        Ok(LinearWeights { dims: wt.dims2()?.into(), w: values(&wt)?, b: values(b)? })
    }

    /// The query, key and value projections at `prefix` as one `[hidden, 3·hidden]` matmul;
    /// the query part is multiplied by `query_scale` (the model's, so the product's name
    /// still says its weights).
    fn qkv(&mut self, x: &str, prefix: &str, query_scale: f64, layer: usize) -> Result<String, EngineError> {
        let weights = |w: &Self| -> Result<LinearWeights, EngineError> {
            let mut weights = Vec::new();
            let mut biases = Vec::new();
            for (part, scale) in [("query", query_scale), ("key", 1.0), ("value", 1.0)] {
                weights.push((w.ckpt.get(&format!("{prefix}.{part}.weight"))? * scale)?);
                biases.push((w.ckpt.get(&format!("{prefix}.{part}.bias"))? * scale)?);
            }
            let wt = Tensor::cat(&weights, 0)?.t()?.contiguous()?;
            let b = Tensor::cat(&biases, 0)?;
            Ok(LinearWeights { dims: wt.dims2()?.into(), w: values(&wt)?, b: values(&b)? })
        };
        let site = Site { layer, product: Product::Qkv };
        self.product(x, &format!("{prefix}.qkv"), site, weights)
    }

    /// `x · w + b` for the `Linear` named `name` whose weight `[in, out]` and bias `weights`
    /// reads, the product at `site`, in the graph's precision: fp32 MatMul and Add (which ONNX
    /// Runtime fuses), or int8 ([`row_quantized_product`]: each token on its own scale, the
    /// weight per output column, the bias added in fp32).
    fn product(
        &mut self,
        x: &str,
        name: &str,
        site: Site,
        weights: impl FnOnce(&Self) -> Result<LinearWeights, EngineError>,
    ) -> Result<String, EngineError> {
        match self.precision.clone() {
            Precision::Fp32 => {
                let LinearWeights { dims, w, b } = weights(self)?;
                let bias = self.g.f32s(&format!("{name}.bias"), &[dims[1]], b);
                let w = self.g.f32s(&format!("{name}.weight"), &dims, w);
                let xw = self.g.op("MatMul", &[x, &w], vec![]);
                Ok(self.g.op("Add", &[&xw, &bias], vec![]))
            }
            Precision::Int8(outliers) => {
                let (w, bias) = self.int8_product(name, site, &outliers, weights)?;
                Ok(row_quantized_product(&mut self.g, x, &w, Some(&bias)))
            }
        }
    }

    /// The int8 constants and the bias of the `Linear` named `name` (the product at `site`,
    /// less its `outliers` input channels, split into copies within the ordinary channels'
    /// range: [`super::outliers::split_channels`]): the model's prepared product, prepared
    /// from `weights` the first time.
    fn int8_product(
        &mut self,
        name: &str,
        site: Site,
        outliers: &Outliers,
        weights: impl FnOnce(&Self) -> Result<LinearWeights, EngineError>,
    ) -> Result<(Int8Weights, String), EngineError> {
        let products = self.products;
        let prepared =
            products.get_or_prepare(name, outliers.channels(site), self.kernel, || weights(self))?;
        let bias = self.g.f32s(&format!("{name}.bias"), &[prepared.bias.len()], prepared.bias.clone());
        let split = prepared.split.as_ref().map(|(scale, copies)| ChannelSplit {
            scale: self.g.f32s(&format!("{name}.channel_scale"), &[scale.len()], scale.clone()),
            copies: self.g.i64_table(&format!("{name}.channel_copies"), &[copies.len()], copies.clone()),
        });
        Ok((prepared.weights.add(&mut self.g, name, split), bias))
    }

    /// The int8 weights of the Hugging Face `Linear` at `prefix`, the product at `site`, and
    /// its bias.
    fn int8_linear(
        &mut self,
        prefix: &str,
        site: Site,
        outliers: &Outliers,
    ) -> Result<(Int8Weights, String), EngineError> {
        self.int8_product(prefix, site, outliers, |w| w.linear_weights(prefix))
    }

    /// A block's output, `LayerNormalization(x · Wᵀ + b + residual)` for the `Linear` at
    /// `prefix` (the product at `site`) and the norm at `norm`; in int8 the product's rows are
    /// scaled back, added and normalised by one operator ([`row_quantized_output`]).
    fn block_output(
        &mut self,
        x: &str,
        prefix: &str,
        site: Site,
        residual: &str,
        norm: &str,
    ) -> Result<String, EngineError> {
        let Precision::Int8(outliers) = self.precision.clone() else {
            let y = self.linear(x, prefix, site)?;
            let sum = self.g.op("Add", &[&y, residual], vec![]);
            return self.layer_norm(&sum, norm);
        };
        let (w, bias) = self.int8_linear(prefix, site, &outliers)?;
        let then = self.residual_norm(residual, norm)?;
        Ok(row_quantized_output(&mut self.g, x, &w, &bias, &then))
    }

    /// The feed-forward block of layer `layer` (`prefix`) with its residual `x` and norm:
    /// `LayerNormalization(gelu(x · up + b) · down + b + x)`; in fp32 also the down
    /// projection's input, for calibration. Int8 writes no fp32 tensor between the two
    /// products ([`int8_feed_forward`]).
    fn feed_forward(
        &mut self,
        x: &str,
        prefix: &str,
        layer: usize,
    ) -> Result<(String, Option<String>), EngineError> {
        let at = |product| Site { layer, product };
        let (up, down) = (format!("{prefix}.intermediate.dense"), format!("{prefix}.output.dense"));
        let norm = format!("{prefix}.output.LayerNorm");
        let Precision::Int8(outliers) = self.precision.clone() else {
            let inner = self.linear(x, &up, at(Product::Up))?;
            let inner = self.gelu(&inner);
            return Ok((self.block_output(&inner, &down, at(Product::Down), x, &norm)?, Some(inner)));
        };
        let (up, up_bias) = self.int8_linear(&up, at(Product::Up), &outliers)?;
        let (down, down_bias) = self.int8_linear(&down, at(Product::Down), &outliers)?;
        let then = self.residual_norm(x, &norm)?;
        Ok((int8_feed_forward(&mut self.g, x, (&up, &up_bias), (&down, &down_bias), &then), None))
    }

    /// The residual `x` and the weights of the norm at `prefix`, for an int8 block output.
    fn residual_norm(&mut self, x: &str, prefix: &str) -> Result<ResidualNorm, EngineError> {
        Ok(ResidualNorm {
            residual: x.to_string(),
            gamma: self.weight(&format!("{prefix}.weight"))?,
            beta: self.weight(&format!("{prefix}.bias"))?,
            epsilon: self.g.scalar(self.ckpt.config.layer_norm_eps as f32),
        })
    }

    fn layer_norm(&mut self, x: &str, prefix: &str) -> Result<String, EngineError> {
        let w = self.weight(&format!("{prefix}.weight"))?;
        let b = self.weight(&format!("{prefix}.bias"))?;
        let attrs =
            vec![("axis", Attr::Int(-1)), ("epsilon", Attr::Float(self.ckpt.config.layer_norm_eps as f32))];
        Ok(self.g.op("LayerNormalization", &[x, &w, &b], attrs))
    }

    /// The additive attention bias `[batch, 1, 1, len]` of token `sizes`: [`PADDED_KEY_BIAS`] for padding
    /// (size 0), else 0, plus log(size) when `proportional` (ToMe: a merged token counts as
    /// the tokens it holds); for MPNet plus its relative position bias over the `len` tokens
    /// (`[batch, heads, len, len]` then). Written once per sequence length, shared by the layers.
    fn attention_bias(&mut self, sizes: &str, proportional: bool) -> Result<String, EngineError> {
        let one = self.g.scalar(1.0);
        let real = self.g.op("Min", &[sizes, &one], vec![]);
        let shifted = self.g.op("Sub", &[&real, &one], vec![]);
        let big = self.g.f32s(PADDED_KEY_BIAS_STEM, &[], vec![-PADDED_KEY_BIAS]);
        let mut bias = self.g.op("Mul", &[&shifted, &big], vec![]);
        if proportional {
            let at_least_one = self.g.op("Max", &[sizes, &one], vec![]);
            let log = self.g.op("Log", &[&at_least_one], vec![]);
            bias = self.g.op("Add", &[&bias, &log], vec![]);
        }
        let axes = self.g.i64s(&[1, 2]);
        let bias = self.g.op("Unsqueeze", &[&bias, &axes], vec![]);
        Ok(match self.relative_bias(sizes)? {
            Some(relative) => self.g.op("Add", &[&bias, &relative], vec![]),
            None => bias,
        })
    }

    /// Word embeddings (with the prompt vectors after `[CLS]`) plus position embeddings (token
    /// type 0 folded in), before their norm; returns them and the float mask over the same tokens.
    fn embeddings(&mut self, prompt: &[Vec<f32>], mask: String) -> Result<(String, String), EngineError> {
        let word = self.weight("embeddings.word_embeddings.weight")?;
        let mut tokens = self.g.op("Gather", &[&word, INPUT_IDS], vec![("axis", Attr::Int(0))]);
        let mut mask = mask;
        if !prompt.is_empty() {
            let (p, h) = (prompt.len(), self.ckpt.config.hidden_size);
            let batch =
                self.g.op("Shape", &[INPUT_IDS], vec![("start", Attr::Int(0)), ("end", Attr::Int(1))]);
            let vectors = self.g.f32s("prompt", &[1, p, h], prompt.concat());
            let vectors = self.broadcast_rows(&vectors, &batch, &[p as i64, h as i64]);
            tokens = self.after_first(&tokens, &vectors);
            let ones = self.g.f32s("prompt_mask", &[1, p], vec![1.0; p]);
            let ones = self.broadcast_rows(&ones, &batch, &[p as i64]);
            mask = self.after_first(&mask, &ones);
        }
        let len = self.g.op("Shape", &[&tokens], vec![("start", Attr::Int(1)), ("end", Attr::Int(2))]);
        let positions = self.ckpt.get("embeddings.position_embeddings.weight")?;
        let types = self.ckpt.get("embeddings.token_type_embeddings.weight")?;
        let table = positions.broadcast_add(&types.get(0)?)?;
        let dims = table.dims().to_vec();
        let table = self.g.f32s("embeddings.position_and_type", &dims, values(&table)?);
        let zero = self.g.i64s(&[0]);
        let rows = self.g.op("Slice", &[&table, &zero, &len, &zero], vec![]);
        Ok((self.g.op("Add", &[&tokens, &rows], vec![]), mask))
    }

    /// `t` (leading dimension 1) repeated to `batch` rows: shape `[batch, rest...]`.
    fn broadcast_rows(&mut self, t: &str, batch: &str, rest: &[i64]) -> String {
        let rest = self.g.i64s(rest);
        let shape = self.g.op("Concat", &[batch, &rest], vec![("axis", Attr::Int(0))]);
        self.g.op("Expand", &[t, &shape], vec![])
    }

    /// `inserted` placed between the first position of `seq` and the rest (axis 1).
    fn after_first(&mut self, seq: &str, inserted: &str) -> String {
        self.replace_after_first(seq, inserted, 0)
    }

    /// `inserted` placed after the first position of `seq` (axis 1), in place of the
    /// `replaced` positions that followed it.
    fn replace_after_first(&mut self, seq: &str, inserted: &str, replaced: usize) -> String {
        let (zero, one, end) = (self.g.i64s(&[0]), self.g.i64s(&[1]), self.g.i64s(&[i64::MAX]));
        let first = self.g.op("Slice", &[seq, &zero, &one, &one], vec![]);
        let from = self.g.i64s(&[1 + replaced as i64]);
        let rest = self.g.op("Slice", &[seq, &from, &end, &one], vec![]);
        self.g.op("Concat", &[&first, inserted, &rest], vec![("axis", Attr::Int(1))])
    }

    /// Layer `layer`'s `p` prompts from [`PROMPT_IN`] put after `[CLS]` in place of `replaced`
    /// earlier ones: the hidden states, the token sizes (prompts count 1) and the pooling
    /// weights (prompts count 0) after it.
    fn insert_prompts(
        &mut self,
        layer: usize,
        p: usize,
        replaced: usize,
        x: &str,
        sizes: &str,
        pooled: &str,
    ) -> Result<(String, String, String), EngineError> {
        let index = self.g.i64s(&[layer as i64]);
        let gathered = self.g.op("Gather", &[PROMPT_IN, &index], vec![("axis", Attr::Int(1))]);
        let axis = self.g.i64s(&[1]);
        let prompts = self.g.op("Squeeze", &[&gathered, &axis], vec![]);
        let x = self.replace_after_first(x, &prompts, replaced);
        if replaced > 0 {
            return Ok((x, sizes.to_string(), pooled.to_string()));
        }
        let batch = self.g.op("Shape", &[PROMPT_IN], vec![("start", Attr::Int(0)), ("end", Attr::Int(1))]);
        let mut row = |name: &str, value: f32| {
            let t = self.g.f32s(&format!("{name}.{layer}"), &[1, p], vec![value; p]);
            self.broadcast_rows(&t, &batch, &[p as i64])
        };
        let (ones, zeros) = (row("prompt_sizes", 1.0), row("prompt_pooling", 0.0));
        let sizes = self.after_first(sizes, &ones);
        let pooled = self.after_first(pooled, &zeros);
        Ok((x, sizes, pooled))
    }

    /// One encoder layer: self-attention and feed-forward, each with a residual and a norm,
    /// with `merge` tokens merged in between.
    fn layer(
        &mut self,
        i: usize,
        x: &str,
        sizes: &str,
        bias: &str,
        merge: usize,
    ) -> Result<LayerOut, EngineError> {
        let cfg = &self.ckpt.config;
        let (h, heads) = (cfg.hidden_size, cfg.num_attention_heads);
        let d = h / heads;
        let p = format!("encoder.layer.{i}");
        // softmax(Q·Kᵀ/√d + bias)·V with one projection matmul for Q, K and V; the 1/√d is
        // folded into the query weights.
        let layer_in = x;
        let qkv = self.qkv(layer_in, &format!("{p}.attention.self"), 1.0 / (d as f64).sqrt(), i)?;
        let (context, padded) = match self.tokens.clone() {
            Tokens::Packed { lengths, .. } if cfg.relative_attention_num_buckets.is_none() => {
                let heads = self.g.i64s(&[heads as i64]);
                let [context] = self.g.morph_op(PACKED_ATTENTION, &[&qkv, &lengths, &heads]);
                (context, None)
            }
            _ => {
                let (context, padded) = self.padded_attention(&qkv, bias, heads, d);
                (context, Some(padded))
            }
        };
        let site = Site { layer: i, product: Product::AttentionOutput };
        let (dense, norm) =
            (format!("{p}.attention.output.dense"), format!("{p}.attention.output.LayerNorm"));
        let mut x = self.block_output(&context, &dense, site, layer_in, &norm)?;
        let mut sizes = sizes.to_string();
        if merge > 0 {
            let keys = &padded.as_ref().expect("merging keeps the padding").keys;
            (x, sizes) = self.merge_tokens(&x, &sizes, keys, merge);
        }
        let (hidden, inner) = self.feed_forward(&x, &p, i)?;
        let product_inputs = [Some(layer_in.to_string()), Some(context), Some(x), inner];
        Ok(LayerOut { hidden, sizes, probs: padded.map(|p| p.probs), product_inputs })
    }

    /// Attention in the padded layout, from the packed one where the tokens are: `qkv`
    /// (`[.., 3 · hidden]`) split into Q, K and V, each spread to `[batch, heads, len, d]`,
    /// `softmax(Q·Kᵀ + bias)·V`, and the context back in the graph's layout.
    fn padded_attention(
        &mut self,
        qkv: &str,
        bias: &str,
        heads: usize,
        d: usize,
    ) -> (String, PaddedAttention) {
        let h = heads * d;
        // Split where the tokens are packed (fewer rows), then each part to the padded layout.
        let widths = self.g.i64s(&[h as i64; 3]);
        let parts: [String; 3] = self.g.op_n("Split", &[qkv, &widths], vec![("axis", Attr::Int(-1))]);
        let [q, k, v] = parts.map(|part| self.unpack(&part));
        let split = self.g.i64s(&[0, 0, heads as i64, d as i64]);
        let mut heads_of = |part: &str, perm: [i64; 4]| {
            let r = self.g.op("Reshape", &[part, &split], vec![]);
            self.g.op("Transpose", &[&r], vec![("perm", Attr::Ints(perm.to_vec()))])
        };
        let keys = k.clone();
        let q = heads_of(&q, [0, 2, 1, 3]);
        let k = heads_of(&k, [0, 2, 3, 1]);
        let v = heads_of(&v, [0, 2, 1, 3]);
        let scores = self.g.op("MatMul", &[&q, &k], vec![]);
        let scores = self.g.op("Add", &[&scores, bias], vec![]);
        let probs = self.g.op("Softmax", &[&scores], vec![("axis", Attr::Int(-1))]);
        let context = self.g.op("MatMul", &[&probs, &v], vec![]);
        let context = self.g.op("Transpose", &[&context], vec![("perm", Attr::Ints(vec![0, 2, 1, 3]))]);
        let joined = self.g.i64s(&[0, 0, h as i64]);
        let context = self.g.op("Reshape", &[&context, &joined], vec![]);
        (self.pack(&context), PaddedAttention { probs, keys })
    }

    /// MPNet's relative position bias `[1, heads, len, len]` over the tokens of `sizes`
    /// (`[batch, len]`): its table gathered at each (query, key) pair's bucket. `None` for the
    /// architectures without one.
    fn relative_bias(&mut self, sizes: &str) -> Result<Option<String>, EngineError> {
        if self.ckpt.config.relative_attention_num_buckets.is_none() {
            return Ok(None);
        }
        let (table, buckets) = match &self.relative {
            Some(written) => written.clone(),
            None => {
                let t = self.ckpt.get(RELATIVE_BIAS)?;
                let dims = t.dims().to_vec();
                let table = self.g.f32s(RELATIVE_BIAS, &dims, values(t)?);
                let max = self.ckpt.config.max_position_embeddings;
                let index = self.g.i64_table("relative_buckets", &[max, max], relative_buckets(max, dims[0]));
                self.relative = Some((table.clone(), index.clone()));
                (table, index)
            }
        };
        let len = self.g.op("Shape", &[sizes], vec![("start", Attr::Int(1)), ("end", Attr::Int(2))]);
        let ends = self.g.op("Concat", &[&len, &len], vec![("axis", Attr::Int(0))]);
        let (starts, axes) = (self.g.i64s(&[0, 0]), self.g.i64s(&[0, 1]));
        let index = self.g.op("Slice", &[&buckets, &starts, &ends, &axes], vec![]);
        let bias = self.g.op("Gather", &[&table, &index], vec![("axis", Attr::Int(0))]);
        let bias = self.g.op("Transpose", &[&bias], vec![("perm", Attr::Ints(vec![2, 0, 1]))]);
        let first = self.g.i64s(&[0]);
        Ok(Some(self.g.op("Unsqueeze", &[&bias, &first], vec![])))
    }

    /// `x · ½ · (1 + erf(x / √2))`, the pattern ONNX Runtime fuses into one Gelu kernel.
    fn gelu(&mut self, x: &str) -> String {
        let sqrt2 = self.g.scalar(std::f32::consts::SQRT_2);
        let one = self.g.scalar(1.0);
        let half = self.g.scalar(0.5);
        let scaled = self.g.op("Div", &[x, &sqrt2], vec![]);
        let erf = self.g.op("Erf", &[&scaled], vec![]);
        let shifted = self.g.op("Add", &[&erf, &one], vec![]);
        let times_x = self.g.op("Mul", &[x, &shifted], vec![]);
        self.g.op("Mul", &[&times_x, &half], vec![])
    }

    /// `[batch, len, hidden]` → `[batch, hidden]`; `mask` is the float mask `[batch, len]`.
    fn pool(&mut self, pooling: Pooling, x: &str, mask: &str) -> String {
        match pooling {
            Pooling::Cls => {
                let first = self.g.i64s(&[0]);
                let cls = self.g.op("Gather", &[x, &first], vec![("axis", Attr::Int(1))]);
                let axis = self.g.i64s(&[1]);
                self.g.op("Squeeze", &[&cls, &axis], vec![])
            }
            Pooling::Last => {
                // 1 at each row's last real token: the 0/1 mask less itself shifted left.
                let (zero, one, len_end) = (self.g.i64s(&[0]), self.g.i64s(&[1]), self.g.i64s(&[i64::MAX]));
                let unit = self.g.scalar(1.0);
                let real = self.g.op("Min", &[mask, &unit], vec![]);
                let rest = self.g.op("Slice", &[&real, &one, &len_end, &one], vec![]);
                let first = self.g.op("Slice", &[&real, &zero, &one, &one], vec![]);
                let nothing = self.g.scalar(0.0);
                let end = self.g.op("Mul", &[&first, &nothing], vec![]);
                let next = self.g.op("Concat", &[&rest, &end], vec![("axis", Attr::Int(1))]);
                let at_last = self.g.op("Sub", &[&real, &next], vec![]);
                let axis = self.g.i64s(&[2]);
                let weights = self.g.op("Unsqueeze", &[&at_last, &axis], vec![]);
                let picked = self.g.op("Mul", &[x, &weights], vec![]);
                self.g.op("ReduceSum", &[&picked, &one], vec![("keepdims", Attr::Int(0))])
            }
            Pooling::Mean => {
                let last = self.g.i64s(&[2]);
                let weights = self.g.op("Unsqueeze", &[mask, &last], vec![]);
                let masked = self.g.op("Mul", &[x, &weights], vec![]);
                let seq = self.g.i64s(&[1]);
                let sum = self.g.op("ReduceSum", &[&masked, &seq], vec![("keepdims", Attr::Int(0))]);
                let count = self.g.op("ReduceSum", &[mask, &seq], vec![("keepdims", Attr::Int(1))]);
                let one = self.g.scalar(1.0);
                let count = self.g.op("Max", &[&count, &one], vec![]);
                self.g.op("Div", &[&sum, &count], vec![])
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::PADDED_KEY_BIAS;

    #[test]
    fn padded_keys_vanish_from_a_rows_sum_without_underflowing_exp() {
        let best_real_key = 1.0_f32;
        let padded_keys_scoring_6_above = 512.0 * (PADDED_KEY_BIAS + 6.0).exp();
        assert_eq!(best_real_key + padded_keys_scoring_6_above, best_real_key);
        assert!((PADDED_KEY_BIAS - 57.0).exp().is_normal());
    }
}
