//! The encoder architectures Morph computes, each read into BERT's layout when its checkpoint
//! loads, so that the candle encoder and every ONNX graph Morph writes (runtime shapes, pipeline
//! stages, token plans) run them unchanged:
//! - **BERT** as is;
//! - **RoBERTa** and **XLM-RoBERTa**: positions count from the padding id plus one, so the
//!   position table is read from that row on; one token type;
//! - **DistilBERT**: its layers renamed (`transformer.layer.N.attention.q_lin` →
//!   `encoder.layer.N.attention.self.query`, …); no token types (a zero row stands in);
//! - **MPNet**: RoBERTa's positions, its layers renamed, and a relative position bias added to
//!   every layer's attention scores (T5's buckets over `key − query`, one table shared by the
//!   layers), which both encoders compute from [`relative_buckets`].

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor};
use morph_engine::EngineError;
use morph_fetch::ModelFiles;
use serde::Deserialize;

/// The table of MPNet's relative position bias, `[buckets, heads]`, as Morph keeps it.
pub const RELATIVE_BIAS: &str = "encoder.relative_attention_bias.weight";
/// The longest distance MPNet's buckets tell apart (`max_distance` in its code).
const MAX_DISTANCE: i64 = 128;

/// Mirrors the fields of Hugging Face's `config.json` that the forward pass needs (DistilBERT's
/// names for them too), after [`Architecture::to_bert`] for the positions.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct BertConfig {
    pub vocab_size: usize,
    #[serde(alias = "dim")]
    pub hidden_size: usize,
    #[serde(alias = "n_layers")]
    pub num_hidden_layers: usize,
    #[serde(alias = "n_heads")]
    pub num_attention_heads: usize,
    #[serde(alias = "hidden_dim")]
    pub intermediate_size: usize,
    #[serde(default = "default_act", alias = "activation")]
    pub hidden_act: String,
    pub max_position_embeddings: usize,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    #[serde(default)]
    pub pad_token_id: u32,
    /// The architecture `config.json` names (see [`Architecture::of`]).
    #[serde(default)]
    pub model_type: Option<String>,
    /// `absolute` (learned positions) when given.
    #[serde(default)]
    pub position_embedding_type: Option<String>,
    /// MPNet's relative position buckets (its attention adds a learned bias per bucket).
    #[serde(default)]
    pub relative_attention_num_buckets: Option<usize>,
}

impl BertConfig {
    /// `config.json`'s sizes and padding id, whatever the architecture: what serving a user's
    /// own ONNX export needs of it. `max_position_embeddings` counts the positions a token may
    /// take (RoBERTa's and MPNet's rows before the first token's left out).
    pub fn read(files: &ModelFiles) -> Result<Self, EngineError> {
        let text = std::fs::read_to_string(&files.config)
            .map_err(|e| EngineError::Load(format!("{}: {e}", files.config.display())))?;
        let mut config: Self =
            serde_json::from_str(&text).map_err(|e| EngineError::Load(format!("config.json: {e}")))?;
        if let Ok(architecture) = config.check() {
            let offset = architecture.position_offset(config.pad_token_id);
            config.max_position_embeddings = config.max_position_embeddings.saturating_sub(offset);
        }
        Ok(config)
    }

    /// The architecture, refused by name where Morph's forward pass would compute it wrongly
    /// without an error: an architecture it does not know, or relative position embeddings of
    /// BERT's kind.
    pub fn check(&self) -> std::result::Result<Architecture, String> {
        let architecture = Architecture::of(self.model_type.as_deref())?;
        match self.position_embedding_type.as_deref() {
            None | Some("absolute") => Ok(architecture),
            Some(other) => {
                Err(format!("position_embedding_type \"{other}\" is not supported (only \"absolute\")"))
            }
        }
    }
}

fn default_act() -> String {
    "gelu".into()
}

fn default_eps() -> f64 {
    1e-12
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Architecture {
    Bert,
    Roberta,
    DistilBert,
    MpNet,
}

impl Architecture {
    /// The architecture `config.json`'s `model_type` names; any other is refused by name.
    pub fn of(model_type: Option<&str>) -> Result<Self, String> {
        match model_type {
            Some("bert") => Ok(Self::Bert),
            Some("roberta" | "xlm-roberta") => Ok(Self::Roberta),
            Some("distilbert") => Ok(Self::DistilBert),
            Some("mpnet") => Ok(Self::MpNet),
            Some(other) => Err(format!(
                "model_type \"{other}\" is not supported: Morph's encoder computes bert, roberta, xlm-roberta, distilbert and mpnet; serve another architecture from its own ONNX export with --onnx"
            )),
            None => {
                Err("config.json names no model_type (one of bert, roberta, xlm-roberta, distilbert, mpnet)"
                    .into())
            }
        }
    }

    /// The prefix a checkpoint saved from a task model puts before the encoder's tensors.
    fn prefix(self) -> &'static str {
        match self {
            Self::Bert => "bert.",
            Self::Roberta => "roberta.",
            Self::DistilBert => "distilbert.",
            Self::MpNet => "mpnet.",
        }
    }

    /// Rows of the position table before the first token's: RoBERTa's and MPNet's position ids
    /// are the padding id + 1 + i (Hugging Face's `create_position_ids_from_input_ids`).
    pub fn position_offset(self, pad_token_id: u32) -> usize {
        match self {
            Self::Roberta | Self::MpNet => pad_token_id as usize + 1,
            Self::Bert | Self::DistilBert => 0,
        }
    }

    /// Rewrites `tensors` into BERT's names and layout, for `config` as
    /// [`BertConfig::read`] reads it (positions counted from the first
    /// token's).
    pub fn to_bert(
        self,
        config: &mut BertConfig,
        tensors: &mut HashMap<String, Tensor>,
    ) -> Result<(), String> {
        let prefix = self.prefix();
        let named: Vec<(String, Tensor)> = tensors.drain().collect();
        for (name, tensor) in named {
            let name = name.strip_prefix(prefix).map_or(name.clone(), str::to_string);
            tensors.insert(self.bert_name(&name), tensor);
        }
        let first = self.position_offset(config.pad_token_id);
        if first > 0 {
            let table = tensors.get_mut(POSITIONS).ok_or_else(|| format!("no tensor {POSITIONS}"))?;
            let rows = table.dim(0).map_err(|e| e.to_string())?;
            let used = config.max_position_embeddings;
            if rows < first + used {
                return Err(format!("{POSITIONS} has {rows} rows, fewer than {first} + {used} positions"));
            }
            *table = table.narrow(0, first, used).map_err(|e| e.to_string())?;
        }
        if !tensors.contains_key(TOKEN_TYPES) {
            let zeros = Tensor::zeros((1, config.hidden_size), DType::F32, &Device::Cpu)
                .map_err(|e| e.to_string())?;
            tensors.insert(TOKEN_TYPES.into(), zeros);
        }
        if self == Self::MpNet && !tensors.contains_key(RELATIVE_BIAS) {
            return Err(format!("an MPNet checkpoint without {RELATIVE_BIAS}"));
        }
        Ok(())
    }

    /// A tensor's name in BERT's layout.
    fn bert_name(self, name: &str) -> String {
        let renames: &[(&str, &str)] = match self {
            Self::Bert | Self::Roberta => return name.to_string(),
            Self::DistilBert => &[
                ("transformer.layer.", "encoder.layer."),
                (".attention.q_lin.", ".attention.self.query."),
                (".attention.k_lin.", ".attention.self.key."),
                (".attention.v_lin.", ".attention.self.value."),
                (".attention.out_lin.", ".attention.output.dense."),
                (".sa_layer_norm.", ".attention.output.LayerNorm."),
                (".ffn.lin1.", ".intermediate.dense."),
                (".ffn.lin2.", ".output.dense."),
                (".output_layer_norm.", ".output.LayerNorm."),
            ],
            Self::MpNet => &[
                (".attention.attn.q.", ".attention.self.query."),
                (".attention.attn.k.", ".attention.self.key."),
                (".attention.attn.v.", ".attention.self.value."),
                (".attention.attn.o.", ".attention.output.dense."),
                (".attention.LayerNorm.", ".attention.output.LayerNorm."),
            ],
        };
        renames.iter().fold(name.to_string(), |n, (from, to)| n.replace(from, to))
    }
}

const POSITIONS: &str = "embeddings.position_embeddings.weight";
const TOKEN_TYPES: &str = "embeddings.token_type_embeddings.weight";

/// MPNet's (T5's) bucket of a key at `relative` = key − query positions: exact for the
/// nearest, log-spaced up to [`MAX_DISTANCE`], halves for keys before and after.
fn bucket(relative: i64, buckets: usize) -> i64 {
    let half = buckets as i64 / 2;
    let n = -relative;
    let mut at = if n < 0 { half } else { 0 };
    let n = n.abs();
    let exact = half / 2;
    at += if n < exact {
        n
    } else {
        let scaled = (n as f64 / exact as f64).ln() / (MAX_DISTANCE as f64 / exact as f64).ln();
        (exact + (scaled * (half - exact) as f64) as i64).min(half - 1)
    };
    at
}

/// The bucket of every (query, key) pair of a `len`-token sequence, row-major `[len, len]`.
pub fn relative_buckets(len: usize, buckets: usize) -> Vec<i64> {
    (0..len as i64).flat_map(|q| (0..len as i64).map(move |k| bucket(k - q, buckets))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values from MPNet's own `relative_position_bucket` (32 buckets, max distance 128).
    #[test]
    fn buckets_match_mpnets() {
        let cases = [
            (0, 0),
            (1, 17),
            (-1, 1),
            (7, 23),
            (-7, 7),
            (8, 24),
            (-8, 8),
            (20, 26),
            (-20, 10),
            (127, 31),
            (-127, 15),
            (500, 31),
            (-500, 15),
        ];
        for (relative, expected) in cases {
            assert_eq!(bucket(relative, 32), expected, "relative position {relative}");
        }
    }

    #[test]
    fn other_model_types_are_refused_by_name() {
        assert_eq!(Architecture::of(Some("xlm-roberta")), Ok(Architecture::Roberta));
        let err = Architecture::of(Some("deberta-v2")).unwrap_err();
        assert!(
            err.contains("model_type \"deberta-v2\" is not supported") && err.contains("--onnx"),
            "{err}"
        );
        assert!(Architecture::of(None).unwrap_err().contains("no model_type"));
    }
}
