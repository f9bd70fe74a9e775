//! Training the length head on precomputed pooled vectors.

use candle_core::Tensor;
use candle_nn::VarMap;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::fit::TrainConfig;
use morph_encoder::predictor::head::LengthHead;
use morph_engine::EngineError;

/// Trains `head` (its parameters in `vars`) on pooled vectors `x` `[n, dim]` and true output
/// `lengths`, from parameters drawn with `config.seed` (so a head is a function of its data and
/// seed); returns the mean training loss of each epoch.
pub fn train(
    vars: &VarMap,
    head: &LengthHead,
    x: &Tensor,
    lengths: &[u32],
    config: &TrainConfig,
) -> Result<Vec<f32>, EngineError> {
    redraw(vars, config.seed)?;
    let loss = |rows: &Tensor, chunk: &[u32]| {
        let batch_lengths: Vec<u32> = chunk.iter().map(|&i| lengths[i as usize]).collect();
        head.loss(&head.forward(&x.index_select(rows, 0)?)?, &batch_lengths)
    };
    crate::fit::fit(vars, lengths.len(), config, loss, |_| Ok(false))
}

/// Draws every parameter in `vars` anew, uniform in ±1/√(its layer's input width), in name
/// order from `seed` (candle's CPU generator, which made them, cannot be seeded).
fn redraw(vars: &VarMap, seed: u64) -> Result<(), EngineError> {
    let data = vars.data().lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut names: Vec<&String> = data.keys().collect();
    names.sort();
    let mut rng = StdRng::seed_from_u64(seed);
    for name in names {
        let var = &data[name];
        let layer = name.rsplit_once('.').map_or(name.as_str(), |(layer, _)| layer);
        let fan_in = data.get(&format!("{layer}.weight")).and_then(|w| w.dims().last().copied()).unwrap_or(1);
        let bound = 1.0 / (fan_in.max(1) as f32).sqrt();
        let values: Vec<f32> = (0..var.elem_count()).map(|_| rng.random_range(-bound..bound)).collect();
        var.set(&Tensor::from_vec(values, var.shape(), var.device())?)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;
    use morph_encoder::predictor::{head::Buckets, head::Objective};

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
    fn training_lowers_the_loss_for_every_objective_linear_or_not() {
        let (x, lengths) = fixed_set();
        for (objective, hidden) in Objective::ALL.into_iter().flat_map(|o| [(o, 0), (o, 32)]) {
            let vars = VarMap::new();
            let head =
                LengthHead::new(&vars, 16, hidden, objective, Buckets::from_lengths(&lengths)).unwrap();
            let config = TrainConfig { epochs: 30, lr: 1e-2, ..TrainConfig::default() };
            let losses = train(&vars, &head, &x, &lengths, &config).unwrap();
            let (first, last) = (losses[0], losses[losses.len() - 1]);
            assert!(last < 0.7 * first, "{objective:?} with {hidden} hidden units: loss {first} -> {last}");
        }
    }

    /// The same data and seed give the same head; another seed another.
    #[test]
    fn a_head_is_a_function_of_its_data_and_seed() {
        let (x, lengths) = fixed_set();
        let predict = |seed: u64| {
            let vars = VarMap::new();
            let head =
                LengthHead::new(&vars, 16, 8, Objective::RegressionL1, Buckets::from_lengths(&lengths))
                    .unwrap();
            let config = TrainConfig { epochs: 3, lr: 1e-2, seed, ..TrainConfig::default() };
            train(&vars, &head, &x, &lengths, &config).unwrap();
            head.forward(&x).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap()
        };
        assert_eq!(predict(1), predict(1));
        assert_ne!(predict(1), predict(2));
    }

    /// A regression head does not predict past the longest length it learned from: a vector far
    /// beyond the training ones (first coordinate 10, where the lengths grow with it) gets that
    /// length, a training vector less.
    #[test]
    fn regression_stops_at_the_longest_training_length() {
        let (x, lengths) = fixed_set();
        let buckets = Buckets::from_lengths(&lengths);
        let longest = *lengths.iter().max().unwrap();
        assert_eq!(buckets.longest, longest);
        let vars = VarMap::new();
        let head = LengthHead::new(&vars, 16, 0, Objective::RegressionMse, buckets).unwrap();
        train(&vars, &head, &x, &lengths, &TrainConfig { epochs: 30, lr: 1e-2, ..TrainConfig::default() })
            .unwrap();
        let mut far = vec![0f32; 16];
        far[0] = 10.0;
        let probe = Tensor::from_vec(far, (1, 16), &Device::Cpu).unwrap();
        assert_eq!(head.predict(&probe).unwrap(), vec![longest]);
        let first_row = x.narrow(0, 0, 1).unwrap();
        assert!(head.predict(&first_row).unwrap()[0] < longest);
    }
}
