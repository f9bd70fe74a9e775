//! Training a task's classification head on frozen features with the paper's batch 32 and
//! learning rate 0.002, for at most 50 epochs, keeping the epoch with the best accuracy on a
//! validation slice of the training split.

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor};
use candle_nn::{VarBuilder, VarMap};
use morph_encoder::tasks::head::ClassifierHead;
use morph_engine::EngineError;

use crate::fit::{KeepBest, TrainConfig, fit};

/// Epochs without a better validation accuracy before training stops.
const PATIENCE: usize = 10;

/// A trained head, its parameters' values (named `prefix.weight`, `prefix.bias`), and how
/// training went.
#[derive(Debug)]
pub struct Trained {
    pub weights: HashMap<String, Tensor>,
    pub head: ClassifierHead,
    pub losses: Vec<f32>,
    pub val_accuracy: f64,
}

/// Trains a head of `classes` outputs on `x` `[n, dim]` with `labels`, validated on
/// `(val_x, val_labels)`; its parameters are named `prefix.weight` and `prefix.bias`.
pub fn train_head(
    prefix: &str,
    (x, labels): (&Tensor, &[u32]),
    (val_x, val_labels): (&Tensor, &[u32]),
    classes: usize,
    config: &TrainConfig,
) -> Result<Trained, EngineError> {
    let vars = VarMap::new();
    let dim = x.dim(1)?;
    let head = ClassifierHead::new(
        VarBuilder::from_varmap(&vars, DType::F32, &Device::Cpu).pp(prefix),
        dim,
        classes,
    )?;
    let targets = Tensor::new(labels, &Device::Cpu)?;
    let loss = |rows: &Tensor, _: &[u32]| {
        candle_nn::loss::cross_entropy(
            &head.logits(&x.index_select(rows, 0)?)?,
            &targets.index_select(rows, 0)?,
        )
    };
    let mut best = KeepBest::new(&vars, PATIENCE)?;
    let after_epoch = |_| best.observe(&vars, head.accuracy(val_x, val_labels)?);
    let losses = fit(&vars, labels.len(), config, loss, after_epoch)?;
    best.restore(&vars)?;
    Ok(Trained { weights: best.weights, head, losses, val_accuracy: best.best })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 400 fixed 8-dimensional vectors in 3 classes by the sign pattern of two coordinates.
    fn fixed_set(seed: u64) -> (Tensor, Vec<u32>) {
        let mut state = seed;
        let mut next = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((state >> 33) as f64 / f64::from(1u32 << 31)) as f32 * 2.0 - 1.0
        };
        let values: Vec<f32> = (0..400 * 8).map(|_| next()).collect();
        let labels = values
            .chunks(8)
            .map(|v| {
                if v[0] > 0.3 {
                    0
                } else if v[1] > 0.0 {
                    1
                } else {
                    2
                }
            })
            .collect();
        (Tensor::from_vec(values, (400, 8), &Device::Cpu).unwrap(), labels)
    }

    #[test]
    fn training_lowers_the_loss_and_keeps_the_best_validation_epoch() {
        let (x, labels) = fixed_set(1);
        let (val_x, val_labels) = fixed_set(2);
        let config = TrainConfig { epochs: 50, lr: 0.002, batch: 32, seed: 0 };
        let t = train_head("t.0", (&x, &labels), (&val_x, &val_labels), 3, &config).unwrap();
        assert!(t.losses.last().unwrap() < &(t.losses[0] * 0.8), "{:?}", t.losses);
        // The weights kept are the best epoch's: their accuracy is the one reported.
        assert_eq!(t.head.accuracy(&val_x, &val_labels).unwrap(), t.val_accuracy);
        assert!(t.val_accuracy > 0.7, "{}", t.val_accuracy);
        let p = t.head.predict(&val_x.narrow(0, 0, 2).unwrap()).unwrap();
        assert!((p[0].scores.iter().sum::<f32>() - 1.0).abs() < 1e-4);
        assert!(t.weights.contains_key("t.0.weight"));
        // Trained again, the same head.
        let again = train_head("t.0", (&x, &labels), (&val_x, &val_labels), 3, &config).unwrap();
        assert_eq!(again.losses, t.losses);
        let values = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(values(&again.weights["t.0.weight"]), values(&t.weights["t.0.weight"]));
    }
}
