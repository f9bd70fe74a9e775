//! Tiny random checkpoints of real configurations, written as a model folder Morph loads (the
//! default model's tokenizer beside them), and what their references need: the tensors as
//! saved, and padded batches.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use morph_fetch::{ModelFiles, ModelSource, fetch, morph_home};
use serde_json::Value;

pub(crate) const HIDDEN: usize = 32;
pub(crate) const INNER: usize = 64;
pub(crate) const LAYERS: usize = 2;
/// The default model's vocabulary size: its tokenizer.json goes beside the tiny checkpoints.
pub(crate) const VOCAB: usize = 30522;

/// BERT's layer tensors, as its checkpoints (and RoBERTa's, XLM-R's) name them.
pub(crate) const BERT_LAYER: [&str; 8] = [
    "attention.self.query",
    "attention.self.key",
    "attention.self.value",
    "attention.output.dense",
    "attention.output.LayerNorm",
    "intermediate.dense",
    "output.dense",
    "output.LayerNorm",
];

/// DistilBERT's layer tensors, as its checkpoints name them.
pub(crate) const DISTILBERT_LAYER: [&str; 8] = [
    "attention.q_lin",
    "attention.k_lin",
    "attention.v_lin",
    "attention.out_lin",
    "sa_layer_norm",
    "ffn.lin1",
    "ffn.lin2",
    "output_layer_norm",
];

/// Deterministic pseudo-random values in ±0.3 for a tensor of `shape` (SplitMix64 from
/// `salt`; a smooth pattern such as a sine of the index would make every matrix rank two and
/// hide a wrong position row).
pub(crate) fn fixed(shape: &[usize], salt: usize) -> Tensor {
    let mut state = salt as u64 ^ 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 40) as f32 / (1u64 << 24) as f32
    };
    let values: Vec<f32> = (0..shape.iter().product()).map(|_| (next() - 0.5) * 0.6).collect();
    Tensor::from_vec(values, shape, &Device::Cpu).expect("tensor")
}

/// Writes `config` and `tensors` (name → shape) as a model folder in `dir`.
pub(crate) fn write_model(dir: &Path, config: &Value, tensors: &[(String, Vec<usize>)]) -> ModelFiles {
    let default = fetch(&ModelSource::Default, &morph_home()).expect("the default model");
    std::fs::copy(&default.tokenizer, dir.join("tokenizer.json")).expect("tokenizer.json");
    std::fs::write(dir.join("config.json"), config.to_string()).expect("config.json");
    // Norms as trained ones are, near the identity: a norm's large random bias, the same for
    // every token, would swamp what the tokens and their positions give.
    let value = |salt: usize, name: &str, shape: &[usize]| {
        let noise = fixed(shape, salt);
        match (name.contains("LayerNorm") || name.contains("layer_norm"), name.ends_with(".weight")) {
            (true, true) => ((noise * 0.3).expect("a tensor op") + 1.0).expect("a tensor op"),
            (true, false) => (noise * 0.1).expect("a tensor op"),
            (false, _) => noise,
        }
    };
    let weights: HashMap<String, Tensor> = tensors
        .iter()
        .enumerate()
        .map(|(salt, (name, shape))| (name.clone(), value(salt, name, shape)))
        .collect();
    candle_core::safetensors::save(&weights, dir.join("model.safetensors")).expect("safetensors");
    fetch(&ModelSource::Local(dir.to_path_buf()), &morph_home()).expect("the model folder")
}

/// A sequence-classification head: a hidden × hidden dense layer named `dense`, then one to
/// `labels` outputs named `out` (each with its bias).
pub(crate) fn head_tensors(dense: &str, out: &str, labels: usize) -> Vec<(String, Vec<usize>)> {
    vec![
        (format!("{dense}.weight"), vec![HIDDEN, HIDDEN]),
        (format!("{dense}.bias"), vec![HIDDEN]),
        (format!("{out}.weight"), vec![labels, HIDDEN]),
        (format!("{out}.bias"), vec![labels]),
    ]
}

/// One layer's tensors under `prefix`, named by `parts` (query, key, value, attention out,
/// attention norm, inner, outer, output norm).
pub(crate) fn layer_tensors(prefix: &str, parts: [&str; 8]) -> Vec<(String, Vec<usize>)> {
    let [q, k, v, o, norm1, inner, outer, norm2] = parts;
    let mut out = Vec::new();
    for (part, rows, cols) in [
        (q, HIDDEN, HIDDEN),
        (k, HIDDEN, HIDDEN),
        (v, HIDDEN, HIDDEN),
        (o, HIDDEN, HIDDEN),
        (inner, INNER, HIDDEN),
        (outer, HIDDEN, INNER),
    ] {
        out.push((format!("{prefix}.{part}.weight"), vec![rows, cols]));
        out.push((format!("{prefix}.{part}.bias"), vec![rows]));
    }
    for norm in [norm1, norm2] {
        out.push((format!("{prefix}.{norm}.weight"), vec![HIDDEN]));
        out.push((format!("{prefix}.{norm}.bias"), vec![HIDDEN]));
    }
    out
}

/// The embedding tensors under `prefix`, with `types` rows of token types (none for 0).
pub(crate) fn embeddings(prefix: &str, positions: usize, types: usize) -> Vec<(String, Vec<usize>)> {
    let mut out = vec![
        (format!("{prefix}embeddings.word_embeddings.weight"), vec![VOCAB, HIDDEN]),
        (format!("{prefix}embeddings.position_embeddings.weight"), vec![positions, HIDDEN]),
        (format!("{prefix}embeddings.LayerNorm.weight"), vec![HIDDEN]),
        (format!("{prefix}embeddings.LayerNorm.bias"), vec![HIDDEN]),
    ];
    if types > 0 {
        out.push((format!("{prefix}embeddings.token_type_embeddings.weight"), vec![types, HIDDEN]));
    }
    out
}

/// The checkpoint's tensors as they are, for the reference.
pub(crate) fn weights(files: &ModelFiles) -> VarBuilder<'static> {
    let tensors = candle_core::safetensors::load(&files.weights, &Device::Cpu).expect("weights");
    VarBuilder::from_tensors(tensors, DType::F32, &Device::Cpu)
}

/// `ids` padded with `pad` to their longest, and their mask, as `[batch, len]` tensors.
pub(crate) fn padded(ids: &[Vec<u32>], pad: u32) -> (Tensor, Tensor) {
    let len = ids.iter().map(Vec::len).max().unwrap_or(0);
    let (mut flat, mut mask) = (Vec::new(), Vec::new());
    for row in ids {
        flat.extend(row.iter().copied().chain(std::iter::repeat(pad)).take(len));
        mask.extend((0..len).map(|i| u32::from(i < row.len())));
    }
    let shape = (ids.len(), len);
    (
        Tensor::from_vec(flat, shape, &Device::Cpu).expect("a tensor op"),
        Tensor::from_vec(mask, shape, &Device::Cpu).expect("a tensor op"),
    )
}

/// A tiny BERT cross-encoder (`BertForSequenceClassification`, one output, two token types)
/// written in `dir`, and its config.
pub(crate) fn bert_cross_encoder(dir: &Path) -> (ModelFiles, Value) {
    let config = serde_json::json!({
        "model_type": "bert", "architectures": ["BertForSequenceClassification"],
        "vocab_size": VOCAB, "hidden_size": HIDDEN, "num_hidden_layers": LAYERS, "num_attention_heads": 4,
        "intermediate_size": INNER, "hidden_act": "gelu", "max_position_embeddings": 512,
        "type_vocab_size": 2, "pad_token_id": 0, "layer_norm_eps": 1e-12, "initializer_range": 0.02,
        "position_embedding_type": "absolute", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
        "id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0},
    });
    let mut tensors = embeddings("bert.", 512, 2);
    for i in 0..LAYERS {
        tensors.extend(layer_tensors(&format!("bert.encoder.layer.{i}"), BERT_LAYER));
    }
    tensors.extend(head_tensors("bert.pooler.dense", "classifier", 1));
    (write_model(dir, &config, &tensors), config)
}
