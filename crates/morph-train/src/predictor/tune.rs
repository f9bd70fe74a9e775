//! Fine-tuning the encoder's top layers together with the length head. SSJF (§3.1) fine-tunes
//! its whole proxy model; Morph's built-in predictor is a head on a frozen encoder. Here the
//! layers below the tuned ones stay frozen and run once per prompt (their hidden states are
//! kept); then the top layers, from the pretrained weights, and a head already fitted to the
//! frozen vectors (a linear probe first, then fine-tuning) train together at a small learning
//! rate. The tuned layers go into a copy of the encoder's checkpoint, which is served like any
//! encoder.

use std::path::Path;

use candle_core::{DType, Device, Tensor, Var};
use candle_nn::{VarBuilder, VarMap};

use crate::fit::{TrainConfig, fit};
use morph_encoder::bert::{BertModel, TopLayers};
use morph_encoder::checkpoint::Checkpoint;
use morph_encoder::pooling::{Pool, Pooling, l2_normalize_rows};
use morph_encoder::predictor::head::LengthHead;
use morph_engine::EngineError;
use morph_fetch::ModelFiles;

/// Prompts run through the frozen layers, or the tuned ones when only predicting, at once.
const BATCH: usize = 16;

/// An encoder's top layers as trainable variables over its frozen rest.
pub struct TunedTop {
    frozen: BertModel,
    /// The tuned layers' parameters, named as in the checkpoint.
    vars: VarMap,
    /// The first tuned layer.
    from: usize,
    pooling: Pooling,
}

impl std::fmt::Debug for TunedTop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TunedTop")
            .field("from", &self.from)
            .field("pooling", &self.pooling)
            .finish_non_exhaustive()
    }
}

impl TunedTop {
    /// The top `layers` of `checkpoint`'s encoder to tune, starting from its weights.
    pub fn new(checkpoint: &Checkpoint, layers: usize, pooling: Pooling) -> Result<Self, EngineError> {
        let cfg = &checkpoint.config;
        if layers == 0 || layers > cfg.num_hidden_layers {
            return Err(EngineError::Unsupported(format!(
                "cannot tune the top {layers} of the encoder's {} layers",
                cfg.num_hidden_layers
            )));
        }
        let from = cfg.num_hidden_layers - layers;
        let tensors = checkpoint.tensors.clone();
        let frozen = BertModel::load(VarBuilder::from_tensors(tensors, DType::F32, &Device::Cpu), cfg)?;
        let vars = VarMap::new();
        {
            let mut data = vars.data().lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            for (name, tensor) in &checkpoint.tensors {
                if tuned(name, from) {
                    data.insert(name.clone(), Var::from_tensor(&tensor.to_dtype(DType::F32)?)?);
                }
            }
        }
        Ok(Self { frozen, vars, from, pooling })
    }

    /// The hidden states each prompt (token ids) has below the tuned layers, `[len, hidden]`.
    pub fn frozen_states(&self, ids: &[Vec<u32>]) -> Result<Vec<Tensor>, EngineError> {
        let mut states = vec![None; ids.len()];
        for chunk in by_length(ids.iter().map(Vec::len)).chunks(BATCH) {
            let lengths: Vec<usize> = chunk.iter().map(|&i| ids[i].len()).collect();
            let len = lengths.iter().copied().max().unwrap_or(1);
            let pad = self.frozen.config.pad_token_id;
            let rows = chunk
                .iter()
                .map(|&i| {
                    Tensor::new([ids[i].as_slice(), &vec![pad; len - ids[i].len()]].concat(), &Device::Cpu)
                })
                .collect::<candle_core::Result<Vec<_>>>()?;
            let (x, mask) = stacked(&rows, &lengths, len)?;
            let hidden = self.frozen.forward_first(&x, &mask, self.from)?;
            for (r, &i) in chunk.iter().enumerate() {
                states[i] = Some(hidden.get(r)?.narrow(0, 0, ids[i].len())?.copy()?);
            }
        }
        Ok(states.into_iter().flatten().collect())
    }

    /// Pooled, normalised vectors `[n, hidden]` of prompts' frozen states, as the served
    /// encoder gives them (the tuned layers, pooling, L2 norm); differentiable in the layers.
    pub fn vectors(&self, states: &[&Tensor]) -> candle_core::Result<Tensor> {
        let vb = VarBuilder::from_varmap(&self.vars, DType::F32, &Device::Cpu);
        // Built anew from the variables each time: a layer fuses its q, k, v weights when loaded.
        let top = TopLayers::load(vb, &self.frozen.config, self.from)?;
        let lengths = states.iter().map(|s| s.dim(0)).collect::<candle_core::Result<Vec<_>>>()?;
        let len = lengths.iter().copied().max().unwrap_or(1);
        let rows = states
            .iter()
            .map(|s| s.pad_with_zeros(0, 0, len - s.dim(0)?))
            .collect::<candle_core::Result<Vec<_>>>()?;
        let (x, mask) = stacked(&rows, &lengths, len)?;
        l2_normalize_rows(&self.pooling.apply(&top.forward(&x, &mask)?, &mask)?)
    }

    /// Trains the tuned layers and `head` (its parameters in `head_vars`, already fitted to the
    /// frozen encoder's vectors) together on prompts' frozen `states` and true `lengths`;
    /// returns each epoch's mean training loss.
    pub fn train(
        &self,
        head_vars: &VarMap,
        head: &LengthHead,
        states: &[Tensor],
        lengths: &[u32],
        config: &TrainConfig,
    ) -> Result<Vec<f32>, EngineError> {
        let joint = VarMap::new();
        {
            let mut data = joint.data().lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            for vars in [&self.vars, head_vars] {
                let vars = vars.data().lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                data.extend(vars.iter().map(|(name, var)| (name.clone(), var.clone())));
            }
        }
        let loss = |_: &Tensor, chunk: &[u32]| {
            let batch: Vec<&Tensor> = chunk.iter().map(|&i| &states[i as usize]).collect();
            let batch_lengths: Vec<u32> = chunk.iter().map(|&i| lengths[i as usize]).collect();
            head.loss(&head.forward(&self.vectors(&batch)?)?, &batch_lengths)
        };
        fit(&joint, lengths.len(), config, loss, |_| Ok(false))
    }

    /// `head`'s predicted lengths for prompts' frozen `states`, in order.
    pub fn predict(&self, head: &LengthHead, states: &[Tensor]) -> Result<Vec<u32>, EngineError> {
        let mut predicted = vec![0; states.len()];
        for chunk in by_length(states.iter().map(|s| s.dim(0).unwrap_or(0))).chunks(BATCH) {
            let batch: Vec<&Tensor> = chunk.iter().map(|&i| &states[i]).collect();
            let vectors = self.vectors(&batch)?.detach();
            for (&i, p) in chunk.iter().zip(head.predict(&vectors)?) {
                predicted[i] = p;
            }
        }
        Ok(predicted)
    }

    /// Writes the encoder with its tuned layers to `dir` as a model directory (config,
    /// tokenizer, pooling config and `model.safetensors`, the other tensors as in `files`).
    pub fn save_encoder(
        &self,
        checkpoint: &Checkpoint,
        files: &ModelFiles,
        dir: &Path,
    ) -> Result<(), EngineError> {
        let io = |e: std::io::Error| EngineError::Load(format!("{}: {e}", dir.display()));
        std::fs::create_dir_all(dir.join("1_Pooling")).map_err(io)?;
        std::fs::copy(&files.config, dir.join("config.json")).map_err(io)?;
        std::fs::copy(&files.tokenizer, dir.join("tokenizer.json")).map_err(io)?;
        let pooling = serde_json::json!({"pooling_mode_cls_token": self.pooling == Pooling::Cls});
        std::fs::write(dir.join("1_Pooling/config.json"), pooling.to_string()).map_err(io)?;
        let mut tensors = checkpoint.tensors.clone();
        let data = self.vars.data().lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for (name, var) in data.iter() {
            tensors.insert(name.clone(), var.as_tensor().detach());
        }
        candle_core::safetensors::save(&tensors, dir.join("model.safetensors"))?;
        Ok(())
    }
}

/// Whether checkpoint tensor `name` belongs to a layer from `from` on.
fn tuned(name: &str, from: usize) -> bool {
    let Some(rest) = name.strip_prefix("encoder.layer.") else { return false };
    rest.split('.').next().and_then(|i| i.parse::<usize>().ok()).is_some_and(|i| i >= from)
}

/// Indices of rows of these lengths, shortest first (batches of like lengths pad little).
fn by_length(lengths: impl Iterator<Item = usize>) -> Vec<usize> {
    let lengths: Vec<usize> = lengths.collect();
    let mut order: Vec<usize> = (0..lengths.len()).collect();
    order.sort_by_key(|&i| lengths[i]);
    order
}

/// `rows`, each already padded to `len` tokens, stacked, with the 1/0 mask `[n, len]` of their
/// true `lengths`.
fn stacked(rows: &[Tensor], lengths: &[usize], len: usize) -> candle_core::Result<(Tensor, Tensor)> {
    let mask: Vec<u32> = lengths.iter().flat_map(|&l| (0..len).map(move |t| u32::from(t < l))).collect();
    Ok((Tensor::stack(rows, 0)?, Tensor::from_vec(mask, (rows.len(), len), &Device::Cpu)?))
}
