//! A sequence-classification checkpoint's own head (`BertForSequenceClassification`,
//! `RobertaFor…`, `XLMRobertaFor…`, `DistilBertFor…`, `MPNetFor…`): a classifier of every
//! label `id2label` names, or with one label a cross-encoder's relevance score (a reranker).
//!
//! Every one of these heads reads only the first token's final hidden state, so the encoder
//! runs as for an embedding pooled by [`crate::Pooling::Cls`] (in any engine, runtime shape and
//! policy) and the head is applied to that vector here:
//! - BERT: the pooler `tanh(W_p h + b_p)`, then `classifier` (Hugging Face's `BertPooler`);
//! - RoBERTa, XLM-R and MPNet: `classifier.dense` with tanh, then `classifier.out_proj`;
//! - DistilBERT: `pre_classifier` with ReLU, then `classifier`.
//!
//! A pair (query, document) is tokenized as the model's tokenizer pairs them (its
//! post-processor's pair template). Where the model tells the two segments apart by a token type
//! (BERT's `token_type_ids`), the second segment's ids are folded into a second copy of the
//! vocabulary whose rows carry the type's embedding: [`Segments::fold`] here and
//! [`fold_token_types`] on the checkpoint, so that every engine computes pairs from ids alone.

use std::collections::{BTreeMap, HashMap};

use candle_core::{DType, Device, Tensor};
use serde::Deserialize;

use crate::architecture::{Architecture, BertConfig};
use crate::tokenize::TextTokenizer;
use morph_engine::EngineError;
use morph_fetch::ModelFiles;

/// `config.json`'s fields that say whether, and how, the model classifies.
#[derive(Debug, Clone, Default, Deserialize)]
struct HeadConfig {
    #[serde(default)]
    architectures: Vec<String>,
    #[serde(default)]
    model_type: Option<String>,
    #[serde(default)]
    id2label: BTreeMap<String, String>,
    #[serde(default)]
    num_labels: Option<usize>,
    #[serde(default)]
    problem_type: Option<String>,
    #[serde(default)]
    type_vocab_size: Option<usize>,
}

impl HeadConfig {
    fn read(files: &ModelFiles) -> Result<Self, EngineError> {
        let text = std::fs::read_to_string(&files.config)
            .map_err(|e| EngineError::Load(format!("{}: {e}", files.config.display())))?;
        serde_json::from_str(&text).map_err(|e| EngineError::Load(format!("{}: {e}", files.config.display())))
    }

    fn classifies(&self) -> bool {
        self.architectures.iter().any(|a| a.ends_with("ForSequenceClassification"))
    }
}

/// Whether the model at `files` is a sequence-classification checkpoint (its `architectures`).
pub fn is_classifier(files: &ModelFiles) -> Result<bool, EngineError> {
    Ok(HeadConfig::read(files)?.classifies())
}

/// How logits become scores (`problem_type`; Hugging Face's loss for each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    /// One label per input: softmax over the labels.
    SingleLabel,
    /// Labels independently: a sigmoid each.
    MultiLabel,
    /// Numbers, not probabilities: the logits as they are.
    Regression,
}

/// How a call asks its logits turned into scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scoring {
    /// As the head's problem type says ([`SequenceClassifier::scores`]).
    Head,
    /// The logits themselves (TEI's `raw_scores`).
    Logits,
    Softmax,
    Sigmoid,
}

/// The non-linearity between the head's two layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Activation {
    Tanh,
    Relu,
}

/// A dense layer `y = W x + b` of a head, `W` `[out, in]` row-major.
#[derive(Debug, Clone)]
struct Dense {
    weight: Vec<f32>,
    bias: Vec<f32>,
    inputs: usize,
}

impl Dense {
    fn read(tensors: &HashMap<String, Tensor>, name: &str, inputs: usize) -> Result<Self, EngineError> {
        let get = |part: &str| {
            let key = format!("{name}.{part}");
            let t = tensors
                .get(&key)
                .ok_or_else(|| EngineError::Load(format!("a classification head without {key}")))?;
            Ok::<_, EngineError>(t.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?)
        };
        let (weight, bias) = (get("weight")?, get("bias")?);
        if weight.len() != bias.len() * inputs {
            return Err(EngineError::Load(format!(
                "{name}.weight holds {} values, not {} outputs × {inputs} inputs",
                weight.len(),
                bias.len()
            )));
        }
        Ok(Self { weight, bias, inputs })
    }

    fn outputs(&self) -> usize {
        self.bias.len()
    }

    fn apply(&self, x: &[f32]) -> Vec<f32> {
        let rows = self.weight.chunks_exact(self.inputs);
        rows.zip(&self.bias).map(|(row, b)| b + row.iter().zip(x).map(|(w, v)| w * v).sum::<f32>()).collect()
    }
}

/// A checkpoint's classification head, its labels and how its logits become scores.
#[derive(Debug, Clone)]
pub struct SequenceClassifier {
    dense: Dense,
    activation: Activation,
    out: Dense,
    labels: Vec<String>,
    problem: Problem,
    segments: Segments,
}

/// How a pair's second segment reaches the encoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Segments {
    /// The model has one token type: a pair is its ids as the tokenizer joins them.
    Joined,
    /// The model adds a token type per segment: the second's ids are offset by `vocab` into
    /// the folded vocabulary ([`fold_token_types`]).
    Folded { vocab: u32 },
}

impl Segments {
    /// `ids` with each token of type 1 moved into the folded vocabulary.
    pub fn fold(self, ids: &[u32], types: &[u32]) -> Vec<u32> {
        match self {
            Segments::Joined => ids.to_vec(),
            Segments::Folded { vocab } => {
                ids.iter().zip(types).map(|(&id, &t)| if t == 1 { id + vocab } else { id }).collect()
            }
        }
    }
}

impl SequenceClassifier {
    /// The head of the checkpoint at `files`, or `None` when the model is not a
    /// sequence classifier.
    pub fn load(files: &ModelFiles) -> Result<Option<Self>, EngineError> {
        let config = HeadConfig::read(files)?;
        if !config.classifies() {
            return Ok(None);
        }
        let architecture = Architecture::of(config.model_type.as_deref()).map_err(EngineError::Load)?;
        let sizes = BertConfig::read(files)?;
        let tensors = candle_core::safetensors::load(&files.weights, &Device::Cpu)
            .map_err(|e| EngineError::Load(format!("{}: {e}", files.weights.display())))?;
        let hidden = sizes.hidden_size;
        let (dense, activation, out) = match architecture {
            Architecture::Bert => ("bert.pooler.dense", Activation::Tanh, "classifier"),
            Architecture::Roberta | Architecture::MpNet => {
                ("classifier.dense", Activation::Tanh, "classifier.out_proj")
            }
            Architecture::DistilBert => ("pre_classifier", Activation::Relu, "classifier"),
        };
        let dense = Dense::read(&tensors, dense, hidden)?;
        let out = Dense::read(&tensors, out, dense.outputs())?;
        let labels = labels(&config, out.outputs())?;
        let problem = match config.problem_type.as_deref() {
            Some("multi_label_classification") => Problem::MultiLabel,
            Some("regression") => Problem::Regression,
            Some("single_label_classification") | None => Problem::SingleLabel,
            Some(other) => {
                return Err(EngineError::Load(format!("problem_type \"{other}\" is not one Morph knows")));
            }
        };
        let segments = match config.type_vocab_size.unwrap_or(1) > 1 && architecture == Architecture::Bert {
            true => Segments::Folded { vocab: sizes.vocab_size as u32 },
            false => Segments::Joined,
        };
        Ok(Some(Self { dense, activation, out, labels, problem, segments }))
    }

    /// The labels, in the head's output order.
    pub fn labels(&self) -> &[String] {
        &self.labels
    }

    /// A reranker (cross-encoder): one output, the pair's relevance.
    pub fn is_reranker(&self) -> bool {
        self.labels.len() == 1
    }

    pub fn segments(&self) -> Segments {
        self.segments
    }

    /// The head's logits for the first token's final hidden state.
    pub fn logits(&self, first: &[f32]) -> Vec<f32> {
        let mut x = self.dense.apply(first);
        x.iter_mut().for_each(|v| {
            *v = match self.activation {
                Activation::Tanh => v.tanh(),
                Activation::Relu => v.max(0.0),
            }
        });
        self.out.apply(&x)
    }

    /// `logits` as scores by `scoring`; [`Scoring::Head`]'s are a softmax over several
    /// single-label classes, a sigmoid each for multi-label classes or a single output (TEI's
    /// and sentence-transformers' reranker score), the logits themselves for a regression.
    pub fn scores(&self, logits: &[f32], scoring: Scoring) -> Vec<f32> {
        let scoring = match (scoring, self.problem, logits.len()) {
            (Scoring::Head, Problem::Regression, _) => Scoring::Logits,
            (Scoring::Head, Problem::MultiLabel, _) | (Scoring::Head, Problem::SingleLabel, 1) => {
                Scoring::Sigmoid
            }
            (Scoring::Head, Problem::SingleLabel, _) => Scoring::Softmax,
            (given, ..) => given,
        };
        match scoring {
            Scoring::Logits | Scoring::Head => logits.to_vec(),
            Scoring::Sigmoid => logits.iter().map(|&z| sigmoid(z)).collect(),
            Scoring::Softmax => softmax(logits),
        }
    }

    /// The ids of `text`, or of the pair (`text`, `second`), as the encoder takes them.
    pub fn encode(
        &self,
        tokenizer: &TextTokenizer,
        text: &str,
        second: Option<&str>,
    ) -> Result<Vec<u32>, EngineError> {
        match second {
            None => tokenizer.encode(text),
            Some(second) => {
                let (ids, types) = tokenizer.encode_pair(text, second)?;
                Ok(self.segments.fold(&ids, &types))
            }
        }
    }
}

/// The labels in output order: `id2label` when it names one per output, else `LABEL_i` as
/// Hugging Face names them.
fn labels(config: &HeadConfig, outputs: usize) -> Result<Vec<String>, EngineError> {
    if let Some(n) = config.num_labels.filter(|&n| n != outputs) {
        return Err(EngineError::Load(format!("num_labels is {n} but the head has {outputs} outputs")));
    }
    if config.id2label.is_empty() {
        return Ok((0..outputs).map(|i| format!("LABEL_{i}")).collect());
    }
    let mut labels = vec![None; outputs];
    for (id, label) in &config.id2label {
        let index = id.parse::<usize>().ok().filter(|&i| i < outputs).ok_or_else(|| {
            EngineError::Load(format!("id2label key \"{id}\" is not an output of the head's {outputs}"))
        })?;
        labels[index] = Some(label.clone());
    }
    labels
        .into_iter()
        .enumerate()
        .map(|(i, l)| l.ok_or_else(|| EngineError::Load(format!("id2label names no label for output {i}"))))
        .collect()
}

fn sigmoid(z: f32) -> f32 {
    1.0 / (1.0 + (-z).exp())
}

fn softmax(logits: &[f32]) -> Vec<f32> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let exps: Vec<f32> = logits.iter().map(|z| (z - max).exp()).collect();
    let total: f32 = exps.iter().sum();
    exps.into_iter().map(|e| e / total).collect()
}

/// A classifier's BERT-layout `tensors` with a second copy of the vocabulary for the token type
/// 1 (word + type₁ − type₀; the positions already carry type₀), so that [`Segments::fold`]ed
/// ids select it. Returns the new vocabulary size, or `None` where there is one token type.
pub fn fold_token_types(tensors: &mut HashMap<String, Tensor>) -> Result<Option<usize>, String> {
    let types = tensors.get(TOKEN_TYPES).ok_or_else(|| format!("no tensor {TOKEN_TYPES}"))?;
    if types.dim(0).map_err(|e| e.to_string())? < 2 {
        return Ok(None);
    }
    let shift = (types.get(1).and_then(|t1| t1 - types.get(0)?)).map_err(|e| e.to_string())?;
    let word = tensors.get(WORDS).ok_or_else(|| format!("no tensor {WORDS}"))?;
    let second = word.broadcast_add(&shift).map_err(|e| e.to_string())?;
    let folded = Tensor::cat(&[word, &second], 0).map_err(|e| e.to_string())?;
    let vocab = folded.dim(0).map_err(|e| e.to_string())?;
    tensors.insert(WORDS.into(), folded);
    Ok(Some(vocab))
}

const WORDS: &str = "embeddings.word_embeddings.weight";
const TOKEN_TYPES: &str = "embeddings.token_type_embeddings.weight";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_follow_the_problem_type() {
        let head = |problem| SequenceClassifier {
            dense: Dense { weight: vec![1.0], bias: vec![0.0], inputs: 1 },
            activation: Activation::Tanh,
            out: Dense { weight: vec![1.0], bias: vec![0.0], inputs: 1 },
            labels: vec!["a".into()],
            problem,
            segments: Segments::Joined,
        };
        let s = head(Problem::SingleLabel).scores(&[1.0, 3.0], Scoring::Head);
        assert!((s[0] + s[1] - 1.0).abs() < 1e-6 && s[1] > s[0]);
        assert!((head(Problem::SingleLabel).scores(&[0.0], Scoring::Head)[0] - 0.5).abs() < 1e-6);
        assert_eq!(head(Problem::Regression).scores(&[-2.0, 5.0], Scoring::Head), vec![-2.0, 5.0]);
        let m = head(Problem::MultiLabel).scores(&[0.0, 0.0], Scoring::Head);
        assert_eq!(m, vec![0.5, 0.5]);
        assert_eq!(head(Problem::SingleLabel).scores(&[0.0, 0.0], Scoring::Sigmoid), vec![0.5, 0.5]);
        assert_eq!(head(Problem::SingleLabel).scores(&[1.0, 3.0], Scoring::Logits), vec![1.0, 3.0]);
    }

    #[test]
    fn folding_moves_the_second_segment_and_its_rows_carry_the_type() {
        let folded = Segments::Folded { vocab: 10 }.fold(&[1, 5, 2, 7, 2], &[0, 0, 0, 1, 1]);
        assert_eq!(folded, vec![1, 5, 2, 17, 12]);
        let mut tensors = HashMap::new();
        let words = Tensor::from_vec((0..20).map(|v| v as f32).collect::<Vec<_>>(), (10, 2), &Device::Cpu);
        tensors.insert(WORDS.to_string(), words.unwrap());
        let types = Tensor::from_vec(vec![1f32, 1.0, 4.0, 0.0], (2, 2), &Device::Cpu).unwrap();
        tensors.insert(TOKEN_TYPES.to_string(), types);
        assert_eq!(fold_token_types(&mut tensors), Ok(Some(20)));
        let rows: Vec<Vec<f32>> = tensors[WORDS].to_vec2().unwrap();
        assert_eq!(rows[3], vec![6.0, 7.0]);
        assert_eq!(rows[13], vec![6.0 + 3.0, 7.0 - 1.0]);
    }

    #[test]
    fn labels_come_from_id2label_in_output_order() {
        let config = HeadConfig {
            id2label: [("1".to_string(), "pos".to_string()), ("0".into(), "neg".into())].into(),
            ..HeadConfig::default()
        };
        assert_eq!(labels(&config, 2).unwrap(), ["neg", "pos"]);
        assert!(labels(&config, 3).unwrap_err().to_string().contains("output 2"));
        assert_eq!(labels(&HeadConfig::default(), 1).unwrap(), ["LABEL_0"]);
    }
}
