//! Training a small head in Rust: candle autograd, AdamW, shuffled minibatches over
//! precomputed pooled vectors (the encoder stays frozen).

use std::collections::HashMap;

use candle_core::{Device, Tensor};
use candle_nn::{AdamW, Optimizer, ParamsAdamW, VarMap};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

use morph_engine::EngineError;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrainConfig {
    pub epochs: usize,
    pub lr: f64,
    pub batch: usize,
    /// Shuffling order.
    pub seed: u64,
}

impl Default for TrainConfig {
    fn default() -> Self {
        Self { epochs: 40, lr: 1e-3, batch: 32, seed: 0 }
    }
}

/// Fits the parameters in `vars` over `n` examples: every epoch visits them in a new order in
/// minibatches, `loss(rows, chunk)` gives a minibatch's mean loss (`rows` the indices as a
/// tensor), and `after_epoch(mean loss)` says whether to stop early. Returns each epoch's mean
/// training loss.
pub fn fit(
    vars: &VarMap,
    n: usize,
    config: &TrainConfig,
    mut loss: impl FnMut(&Tensor, &[u32]) -> candle_core::Result<Tensor>,
    mut after_epoch: impl FnMut(f32) -> Result<bool, EngineError>,
) -> Result<Vec<f32>, EngineError> {
    let params = ParamsAdamW { lr: config.lr, weight_decay: 0.01, ..ParamsAdamW::default() };
    let mut optimizer = AdamW::new(vars.all_vars(), params)?;
    let mut rng = StdRng::seed_from_u64(config.seed);
    let mut order: Vec<u32> = (0..n as u32).collect();
    let mut losses = Vec::with_capacity(config.epochs);
    for _ in 0..config.epochs {
        order.shuffle(&mut rng);
        let mut total = 0.0;
        for chunk in order.chunks(config.batch.max(1)) {
            let rows = Tensor::new(chunk, &Device::Cpu)?;
            let batch_loss = loss(&rows, chunk)?;
            optimizer.backward_step(&batch_loss)?;
            total += batch_loss.to_scalar::<f32>()? * chunk.len() as f32;
        }
        let mean = total / n.max(1) as f32;
        losses.push(mean);
        if after_epoch(mean)? {
            break;
        }
    }
    Ok(losses)
}

/// Early stopping on a validation score: remembers the parameters of the best epoch so far and
/// says when `patience` epochs have passed without a better one.
#[derive(Debug)]
pub struct KeepBest {
    pub best: f64,
    pub weights: HashMap<String, Tensor>,
    since_best: usize,
    patience: usize,
}

impl KeepBest {
    pub fn new(vars: &VarMap, patience: usize) -> Result<Self, EngineError> {
        Ok(Self { best: f64::NEG_INFINITY, weights: snapshot(vars)?, since_best: 0, patience })
    }

    /// Records an epoch's validation `score`; whether training should stop.
    pub fn observe(&mut self, vars: &VarMap, score: f64) -> Result<bool, EngineError> {
        if score > self.best {
            (self.best, self.weights, self.since_best) = (score, snapshot(vars)?, 0);
        } else {
            self.since_best += 1;
        }
        Ok(self.since_best >= self.patience)
    }

    /// Puts the best epoch's values back into `vars`.
    pub fn restore(&self, vars: &VarMap) -> Result<(), EngineError> {
        for (name, var) in vars.data().lock().expect("the parameters").iter() {
            var.set(&self.weights[name])?;
        }
        Ok(())
    }
}

/// Copies of the parameters' current values, by name.
fn snapshot(vars: &VarMap) -> Result<HashMap<String, Tensor>, EngineError> {
    let data = vars.data().lock().expect("the parameters");
    data.iter().map(|(name, var)| Ok((name.clone(), var.as_tensor().copy()?))).collect()
}
