//! Training the head in Rust: candle autograd, AdamW, shuffled minibatches over precomputed
//! pooled vectors (the encoder stays frozen).

use candle_core::{Device, Tensor};
use candle_nn::{AdamW, Optimizer, ParamsAdamW, VarMap};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

use super::head::LengthHead;
use crate::EngineError;

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

/// Trains `head` (its parameters in `vars`) on pooled vectors `x` `[n, dim]` and true output
/// `lengths`; returns the mean training loss of each epoch.
pub fn train(
    vars: &VarMap,
    head: &LengthHead,
    x: &Tensor,
    lengths: &[u32],
    config: &TrainConfig,
) -> Result<Vec<f32>, EngineError> {
    let params = ParamsAdamW { lr: config.lr, weight_decay: 0.01, ..ParamsAdamW::default() };
    let mut optimizer = AdamW::new(vars.all_vars(), params)?;
    let mut rng = StdRng::seed_from_u64(config.seed);
    let mut order: Vec<u32> = (0..lengths.len() as u32).collect();
    let mut losses = Vec::with_capacity(config.epochs);
    for _ in 0..config.epochs {
        order.shuffle(&mut rng);
        let mut total = 0.0;
        for chunk in order.chunks(config.batch.max(1)) {
            let index = Tensor::new(chunk, &Device::Cpu)?;
            let batch_lengths: Vec<u32> = chunk.iter().map(|&i| lengths[i as usize]).collect();
            let loss = head.loss(&head.forward(&x.index_select(&index, 0)?)?, &batch_lengths)?;
            optimizer.backward_step(&loss)?;
            total += loss.to_scalar::<f32>()? * chunk.len() as f32;
        }
        losses.push(total / lengths.len().max(1) as f32);
    }
    Ok(losses)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predictor::head::{Buckets, Objective};

    /// 256 fixed 16-dimensional vectors whose output length follows their first coordinate.
    fn fixed_set() -> (Tensor, Vec<u32>) {
        let mut state = 42u64;
        let mut next = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((state >> 33) as f64 / f64::from(1u32 << 31)) as f32 * 2.0 - 1.0
        };
        let values: Vec<f32> = (0..256 * 16).map(|_| next()).collect();
        let lengths = values.chunks(16).map(|v| (200.0 + 180.0 * v[0]) as u32).collect();
        (Tensor::from_vec(values, (256, 16), &Device::Cpu).unwrap(), lengths)
    }

    #[test]
    fn training_lowers_the_loss_for_every_objective() {
        let (x, lengths) = fixed_set();
        for objective in Objective::ALL {
            let vars = VarMap::new();
            let head = LengthHead::new(&vars, 16, objective, Buckets::from_lengths(&lengths)).unwrap();
            let config = TrainConfig { epochs: 30, lr: 1e-2, ..TrainConfig::default() };
            let losses = train(&vars, &head, &x, &lengths, &config).unwrap();
            let (first, last) = (losses[0], losses[losses.len() - 1]);
            assert!(last < 0.7 * first, "{objective:?}: loss {first} -> {last}");
        }
    }
}
