//! BERT-family encoder (Hugging Face `BertModel`), written for candle.
//!
//! Weight names follow the Hugging Face checkpoint without the `bert.` prefix
//! (`embeddings.word_embeddings.weight`, `encoder.layer.{i}.attention.self.query.weight`, ...).
//! Only absolute position embeddings and a single token type are used: sentence encoders
//! embed one segment per sequence. The query, key and value projections are fused into one
//! matrix at load time so each layer does one projection matmul.

use candle_core::{D, DType, Device, Module, Result, Tensor};
use candle_nn::{Embedding, LayerNorm, Linear, VarBuilder};

use crate::architecture::{BertConfig, RELATIVE_BIAS, relative_buckets};
use crate::kernels;
use morph_core::PromptMode;

/// Which implementation of GELU and softmax the forward pass uses. Either way, a pass that
/// autograd tracks (training through the encoder) runs ops with a backward pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Kernels {
    /// Morph's vectorisable kernels ([`crate::kernels`]).
    #[default]
    Morph,
    /// candle's own ops (scalar libm `erf` and `exp`): the baseline in benchmarks.
    Candle,
}

impl Kernels {
    fn gelu_erf(self, xs: &Tensor) -> Result<Tensor> {
        match self {
            Kernels::Morph if !xs.track_op() => kernels::gelu_erf(xs),
            _ => xs.gelu_erf(),
        }
    }

    /// Softmax over the last axis. Morph's kernel and candle's fused one have no backward pass,
    /// so while autograd tracks `xs` (training through the encoder) it is candle's softmax in
    /// differentiable ops (with them, queries and keys got no gradient).
    fn softmax_last_dim(self, xs: &Tensor) -> Result<Tensor> {
        match self {
            _ if xs.track_op() => candle_nn::ops::softmax(xs, D::Minus1),
            Kernels::Morph => kernels::softmax_last_dim(xs),
            Kernels::Candle => candle_nn::ops::softmax_last_dim(xs),
        }
    }
}

/// A layer norm that autograd runs through: candle's fused op (which has no backward pass, so
/// the gradient stopped at every layer's norm) unless `xs` or the norm's weights are tracked
/// (training through the encoder), then the same formula in differentiable ops.
fn layer_norm_forward(norm: &LayerNorm, eps: f64, xs: &Tensor) -> Result<Tensor> {
    match norm.bias() {
        Some(bias) if xs.track_op() || norm.weight().track_op() || bias.track_op() => {
            candle_nn::ops::layer_norm_slow(xs, norm.weight(), bias, eps as f32)
        }
        _ => norm.forward(xs),
    }
}

/// Large negative bias that removes padded keys from the softmax.
const MASKED: f64 = -1e9;

fn linear(in_dim: usize, out_dim: usize, vb: VarBuilder) -> Result<Linear> {
    let w = vb.get((out_dim, in_dim), "weight")?;
    let b = vb.get(out_dim, "bias")?;
    Ok(Linear::new(w, Some(b)))
}

fn layer_norm(dim: usize, eps: f64, vb: VarBuilder) -> Result<LayerNorm> {
    let w = vb.get(dim, "weight")?;
    let b = vb.get(dim, "bias")?;
    Ok(LayerNorm::new(w, b, eps))
}

struct Embeddings {
    word: Embedding,
    /// Position embeddings with token type 0 already added: `[max_positions, hidden]`.
    position_and_type: Tensor,
    norm: LayerNorm,
}

impl Embeddings {
    fn load(vb: VarBuilder, cfg: &BertConfig) -> Result<Self> {
        let h = cfg.hidden_size;
        let word = Embedding::new(vb.get((cfg.vocab_size, h), "word_embeddings.weight")?, h);
        let position = vb.get((cfg.max_position_embeddings, h), "position_embeddings.weight")?;
        let types = vb.pp("token_type_embeddings").get_unchecked("weight")?;
        let position_and_type = position.broadcast_add(&types.get(0)?)?;
        let norm = layer_norm(h, cfg.layer_norm_eps, vb.pp("LayerNorm"))?;
        Ok(Self { word, position_and_type, norm })
    }

    fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        let len = ids.dim(1)?;
        let positions = self.position_and_type.narrow(0, 0, len)?;
        let x = self.word.forward(ids)?.broadcast_add(&positions)?;
        self.norm.forward(&x)
    }
}

struct Layer {
    qkv: Linear,
    attn_out: Linear,
    attn_norm: LayerNorm,
    ffn_in: Linear,
    ffn_out: Linear,
    ffn_norm: LayerNorm,
    eps: f64,
    heads: usize,
}

impl Layer {
    fn load(vb: VarBuilder, cfg: &BertConfig) -> Result<Self> {
        let (h, eps) = (cfg.hidden_size, cfg.layer_norm_eps);
        let attn = vb.pp("attention");
        let proj = attn.pp("self");
        let parts = ["query", "key", "value"].map(|n| linear(h, h, proj.pp(n)));
        let [q, k, v] = parts;
        let (q, k, v) = (q?, k?, v?);
        let weight = Tensor::cat(&[q.weight(), k.weight(), v.weight()], 0)?;
        let bias = [q.bias(), k.bias(), v.bias()]
            .into_iter()
            .map(|b| b.cloned().ok_or_else(|| candle_core::Error::Msg("missing bias".into())))
            .collect::<Result<Vec<_>>>()?;
        let qkv = Linear::new(weight, Some(Tensor::cat(&bias, 0)?));
        Ok(Self {
            qkv,
            attn_out: linear(h, h, attn.pp("output.dense"))?,
            attn_norm: layer_norm(h, eps, attn.pp("output.LayerNorm"))?,
            ffn_in: linear(h, cfg.intermediate_size, vb.pp("intermediate.dense"))?,
            ffn_out: linear(cfg.intermediate_size, h, vb.pp("output.dense"))?,
            ffn_norm: layer_norm(h, eps, vb.pp("output.LayerNorm"))?,
            eps,
            heads: cfg.num_attention_heads,
        })
    }

    /// `x`: `[batch, len, hidden]`; `bias`: `[batch, 1, 1, len]`, 0 for real keys.
    fn forward(&self, x: &Tensor, bias: &Tensor, kernels: Kernels) -> Result<Tensor> {
        let (b, l, h) = x.dims3()?;
        let d = h / self.heads;
        let qkv = self.qkv.forward(x)?;
        let split = |i: usize| -> Result<Tensor> {
            qkv.narrow(2, i * h, h)?.reshape((b, l, self.heads, d))?.transpose(1, 2)?.contiguous()
        };
        let (q, k, v) = (split(0)?, split(1)?, split(2)?);
        let scale = 1.0 / (d as f64).sqrt();
        let scores = (q.matmul(&k.t()?)? * scale)?.broadcast_add(bias)?;
        let probs = kernels.softmax_last_dim(&scores)?;
        let context = probs.matmul(&v)?.transpose(1, 2)?.reshape((b, l, h))?;
        let x = layer_norm_forward(&self.attn_norm, self.eps, &(self.attn_out.forward(&context)? + x)?)?;
        let inner = kernels.gelu_erf(&self.ffn_in.forward(&x)?)?;
        layer_norm_forward(&self.ffn_norm, self.eps, &(self.ffn_out.forward(&inner)? + x)?)
    }
}

/// The encoder stack. `forward` returns the last hidden states; pooling and heads are applied
/// on top of them (see [`crate::pooling`] and `Encoder::pooled`, where heads plug in).
pub struct BertModel {
    embeddings: Embeddings,
    layers: Vec<Layer>,
    /// MPNet's relative position bias table `[buckets, heads]`.
    relative: Option<Tensor>,
    pub config: BertConfig,
    pub kernels: Kernels,
    device: Device,
}

impl std::fmt::Debug for BertModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BertModel").field("config", &self.config).finish_non_exhaustive()
    }
}

impl BertModel {
    pub fn load(vb: VarBuilder, cfg: &BertConfig) -> Result<Self> {
        if cfg.hidden_act != "gelu" {
            candle_core::bail!("hidden_act '{}' is not supported (only 'gelu')", cfg.hidden_act);
        }
        let embeddings = Embeddings::load(vb.pp("embeddings"), cfg)?;
        let layers = (0..cfg.num_hidden_layers)
            .map(|i| Layer::load(vb.pp(format!("encoder.layer.{i}")), cfg))
            .collect::<Result<Vec<_>>>()?;
        let relative = match cfg.relative_attention_num_buckets {
            Some(buckets) => Some(vb.get((buckets, cfg.num_attention_heads), RELATIVE_BIAS)?),
            None => None,
        };
        let device = vb.device().clone();
        Ok(Self { embeddings, layers, relative, config: cfg.clone(), kernels: Kernels::default(), device })
    }

    /// The additive attention bias of a float mask `keep` `[batch, len]`: padded keys masked,
    /// plus MPNet's relative position bias over the `len` tokens.
    fn bias(&self, keep: &Tensor) -> Result<Tensor> {
        let bias = attention_bias(keep)?;
        let Some(table) = &self.relative else { return Ok(bias) };
        let (len, (buckets, heads)) = (keep.dim(1)?, table.dims2()?);
        let index: Vec<u32> = relative_buckets(len, buckets).into_iter().map(|b| b as u32).collect();
        let index = Tensor::from_vec(index, len * len, &self.device)?;
        let relative = table.index_select(&index, 0)?.reshape((len, len, heads))?.permute((2, 0, 1))?;
        bias.broadcast_add(&relative.unsqueeze(0)?)
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// `ids`, `mask`: `[batch, len]` (u32 ids; mask 1 for real tokens, 0 for padding).
    /// Returns hidden states `[batch, len, hidden]`.
    pub fn forward(&self, ids: &Tensor, mask: &Tensor) -> Result<Tensor> {
        self.forward_first(ids, mask, self.layers.len())
    }

    /// [`BertModel::forward`] through the embeddings and only the first `layers` layers.
    pub fn forward_first(&self, ids: &Tensor, mask: &Tensor, layers: usize) -> Result<Tensor> {
        let bias = self.bias(&mask.to_dtype(DType::F32)?)?;
        let mut x = self.embeddings.forward(ids)?;
        for layer in self.layers.iter().take(layers) {
            x = layer.forward(&x, &bias, self.kernels)?;
        }
        Ok(x)
    }

    /// [`BertModel::forward`] with deep prompts (OTAS γ > 0): before every layer l the tokens
    /// `prompts[.., l]` (`[batch or 1, layers, p, hidden]`) go in after `[CLS]`, on top of the
    /// earlier layers' (`Additive`) or in their place (`Replace`, from the second layer on).
    /// Returns the hidden states and the pooling mask over them: prompts attend and are
    /// attended to but are not pooled, so a sentence's vector stays a mean of its own tokens.
    pub fn forward_prompted(
        &self,
        ids: &Tensor,
        mask: &Tensor,
        prompts: &Tensor,
        mode: PromptMode,
    ) -> Result<(Tensor, Tensor)> {
        let (b, _) = ids.dims2()?;
        let (_, layers, p, h) = prompts.dims4()?;
        if layers != self.layers.len() {
            candle_core::bail!("prompts for {layers} layers on a {}-layer encoder", self.layers.len());
        }
        let prompts = prompts.broadcast_as((b, layers, p, h))?;
        let mut keep = mask.to_dtype(DType::F32)?;
        let mut pool = keep.clone();
        let (ones, zeros) = (
            Tensor::ones((b, p), DType::F32, &self.device)?,
            Tensor::zeros((b, p), DType::F32, &self.device)?,
        );
        let mut x = self.embeddings.forward(ids)?;
        for (l, layer) in self.layers.iter().enumerate() {
            let inserted = prompts.narrow(1, l, 1)?.squeeze(1)?;
            if mode == PromptMode::Additive || l == 0 {
                x = after_first(&x, &inserted, 0)?;
                keep = after_first(&keep, &ones, 0)?;
                pool = after_first(&pool, &zeros, 0)?;
            } else {
                x = after_first(&x, &inserted, p)?;
            }
            x = layer.forward(&x, &self.bias(&keep)?, self.kernels)?;
        }
        Ok((x, pool))
    }
}

/// The encoder's layers from `from` on, by themselves: they take the hidden states the layers
/// below gave ([`BertModel::forward_first`]). Loaded from a `VarBuilder` over trainable
/// variables, they are what fine-tuning the top of an encoder trains (on candle's kernels,
/// which autograd runs through).
pub struct TopLayers {
    layers: Vec<Layer>,
}

impl std::fmt::Debug for TopLayers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopLayers").field("layers", &self.layers.len()).finish()
    }
}

impl TopLayers {
    /// Layers `from..` of an encoder of `cfg`, named as in its checkpoint.
    pub fn load(vb: VarBuilder, cfg: &BertConfig, from: usize) -> Result<Self> {
        if cfg.relative_attention_num_buckets.is_some() {
            candle_core::bail!(
                "training an encoder's top layers is for absolute positions; MPNet's relative bias is not trained"
            );
        }
        let layers = (from..cfg.num_hidden_layers)
            .map(|i| Layer::load(vb.pp(format!("encoder.layer.{i}")), cfg))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { layers })
    }

    /// `x`: `[batch, len, hidden]` from the layer below, `mask`: `[batch, len]` → the last
    /// hidden states.
    pub fn forward(&self, x: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let bias = attention_bias(&mask.to_dtype(DType::F32)?)?;
        let mut x = x.clone();
        for layer in &self.layers {
            x = layer.forward(&x, &bias, Kernels::Candle)?;
        }
        Ok(x)
    }
}

/// The additive attention bias `[batch, 1, 1, len]` of a float mask `[batch, len]`.
fn attention_bias(keep: &Tensor) -> Result<Tensor> {
    let (b, l) = keep.dims2()?;
    ((keep - 1.0)? * -MASKED)?.reshape((b, 1, 1, l))
}

/// `inserted` placed after the first position of `seq` (axis 1), in place of the `replaced`
/// positions that followed it.
fn after_first(seq: &Tensor, inserted: &Tensor, replaced: usize) -> Result<Tensor> {
    let len = seq.dim(1)?;
    Tensor::cat(&[&seq.narrow(1, 0, 1)?, inserted, &seq.narrow(1, 1 + replaced, len - 1 - replaced)?], 1)
}

/// Sum over the sequence axis of `[batch, len, hidden]` weighted by `mask` `[batch, len]`.
pub(crate) fn masked_sum(hidden: &Tensor, mask: &Tensor) -> Result<Tensor> {
    let m = mask.to_dtype(hidden.dtype())?.unsqueeze(D::Minus1)?;
    hidden.broadcast_mul(&m)?.sum(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::architecture::Architecture;
    use candle_core::Var;
    use candle_nn::VarMap;

    fn tiny() -> BertConfig {
        BertConfig {
            vocab_size: 10,
            hidden_size: 8,
            num_hidden_layers: 2,
            num_attention_heads: 2,
            intermediate_size: 16,
            hidden_act: "gelu".into(),
            max_position_embeddings: 16,
            layer_norm_eps: 1e-12,
            pad_token_id: 0,
            model_type: Some("bert".into()),
            position_embedding_type: None,
            relative_attention_num_buckets: None,
        }
    }

    #[test]
    fn unknown_architectures_or_relative_positions_are_refused_by_name() {
        assert_eq!(tiny().check(), Ok(Architecture::Bert));
        for (other, known) in [("roberta", Architecture::Roberta), ("distilbert", Architecture::DistilBert)] {
            assert_eq!(BertConfig { model_type: Some(other.into()), ..tiny() }.check(), Ok(known));
        }
        let err = BertConfig { model_type: Some("funnel".into()), ..tiny() }.check().unwrap_err();
        assert!(err.contains("model_type \"funnel\" is not supported") && err.contains("--onnx"), "{err}");
        assert!(BertConfig { model_type: None, ..tiny() }.check().unwrap_err().contains("no model_type"));
        let relative = BertConfig { position_embedding_type: Some("relative_key".into()), ..tiny() };
        assert!(relative.check().unwrap_err().contains("relative_key"));
    }

    /// Fixed values in ±0.5 for a tensor of `shape`; `salt` varies them between tensors.
    fn fixed(shape: &candle_core::Shape, salt: usize) -> Tensor {
        let values: Vec<f32> =
            (0..shape.elem_count()).map(|k| ((k * 7 + salt * 13) as f32 * 0.37).sin() * 0.5).collect();
        Tensor::from_vec(values, shape, &Device::Cpu).unwrap()
    }

    /// Training through the encoder: a loss on the top layers' output reaches the input and the
    /// weights of every layer, norms included. (It used to stop at candle's fused layer norm,
    /// which has no backward pass: nothing below a layer's last norm got a gradient.)
    #[test]
    fn gradients_flow_through_the_layers_to_their_weights_and_input() {
        let cfg = tiny();
        let vars = VarMap::new();
        let vb = VarBuilder::from_varmap(&vars, DType::F32, &Device::Cpu);
        TopLayers::load(vb.clone(), &cfg, 0).unwrap();
        let mut names: Vec<String> = vars.data().lock().unwrap().keys().cloned().collect();
        names.sort();
        for (salt, name) in names.iter().enumerate() {
            let var = vars.data().lock().unwrap()[name].clone();
            var.set(&fixed(var.shape(), salt)).unwrap();
        }
        let top = TopLayers::load(vb, &cfg, 0).unwrap();
        let input = Var::from_tensor(&fixed(&(2, 3, 8).into(), 99)).unwrap();
        let mask = Tensor::new(&[[1u32, 1, 1], [1, 1, 0]], &Device::Cpu).unwrap();
        let loss = top.forward(input.as_tensor(), &mask).unwrap().sqr().unwrap().sum_all().unwrap();
        let grads = loss.backward().unwrap();
        let reached = |var: &Var| {
            grads
                .get(var)
                .is_some_and(|g| g.abs().unwrap().sum_all().unwrap().to_scalar::<f32>().unwrap() > 0.0)
        };
        assert!(reached(&input), "the input");
        for layer in 0..2 {
            for part in
                ["attention.self.query.weight", "attention.output.LayerNorm.weight", "output.LayerNorm.bias"]
            {
                let name = format!("encoder.layer.{layer}.{part}");
                assert!(reached(&vars.data().lock().unwrap()[&name]), "{name}");
            }
        }
    }
}
