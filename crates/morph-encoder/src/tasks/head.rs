//! A task's classification head: one linear layer on the encoder's pooled, normalised vector,
//! one per (task, plan) where the plan pools different features (spec A2). `morph-train`
//! trains them (`tasks::head_train`).

use candle_core::{D, Tensor};
use candle_nn::{Linear, Module, VarBuilder};

use morph_engine::EngineError;

#[derive(Debug)]
pub struct ClassifierHead {
    linear: Linear,
}

/// A prediction: the class and the softmax score of every class.
#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    pub label: usize,
    pub scores: Vec<f32>,
}

impl ClassifierHead {
    /// A head of `classes` outputs over `dim`-wide vectors whose weights `vb` holds, or creates
    /// at zero: a linear softmax classifier trains from zero to the same optimum, and training
    /// (minibatch order seeded) gives the same head every time.
    pub fn new(vb: VarBuilder, dim: usize, classes: usize) -> Result<Self, EngineError> {
        let weight = vb.get_with_hints((classes, dim), "weight", candle_nn::init::ZERO)?;
        let bias = vb.get_with_hints(classes, "bias", candle_nn::init::ZERO)?;
        Ok(Self { linear: Linear::new(weight, Some(bias)) })
    }

    pub fn logits(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        self.linear.forward(x)
    }

    pub fn predict(&self, x: &Tensor) -> Result<Vec<Prediction>, EngineError> {
        let scores = candle_nn::ops::softmax(&self.logits(x)?, D::Minus1)?.to_vec2::<f32>()?;
        Ok(scores
            .into_iter()
            .map(|scores| {
                let label =
                    (0..scores.len()).fold(0, |best, c| if scores[c] > scores[best] { c } else { best });
                Prediction { label, scores }
            })
            .collect())
    }

    /// The fraction of `x`'s rows predicted as `labels`.
    pub fn accuracy(&self, x: &Tensor, labels: &[u32]) -> Result<f64, EngineError> {
        let predicted = self.logits(x)?.argmax(D::Minus1)?.to_vec1::<u32>()?;
        let right = predicted.iter().zip(labels).filter(|(p, l)| p == l).count();
        Ok(right as f64 / labels.len().max(1) as f64)
    }
}
