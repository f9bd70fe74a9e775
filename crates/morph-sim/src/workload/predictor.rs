//! What a policy is told of each generation's output length before it runs: nothing, the
//! truth (oracle), a predictor's error model, or a real predictor's recorded predictions. Part
//! of the workload: [`Predictor::tell`] writes it into the request stream the driver replays.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;

use super::SimRequest;

/// What a policy is told of a generation's output length before it runs.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum Predictor {
    /// Nothing: `predicted` is `None`.
    #[default]
    None,
    /// The true length (oracle SJF).
    Oracle,
    /// A predictor's error model: the true length times e^(mu + sigma·z), z standard normal,
    /// drawn per request from `seed` (`morph train predictor` measures mu and sigma, the mean
    /// and spread of ln(predicted / true) on its test split).
    LogNormal {
        mu: f64,
        sigma: f64,
        #[serde(default)]
        seed: u64,
    },
    /// What a real predictor said, replayed in request order and cycled, as a trace's lengths
    /// are: column `column` of the JSONL that `morph train predictor --predictions` writes (one
    /// column per objective), whose `output_len` column the workload's outputs must read.
    Recorded {
        path: std::path::PathBuf,
        column: String,
        /// The column's values, read when the scenario is loaded.
        #[serde(skip)]
        values: std::sync::Arc<Vec<u32>>,
    },
}

impl Predictor {
    /// The length reported for request `index` whose true output is `truth` tokens.
    pub fn predict(&self, index: u64, truth: u32) -> Option<u32> {
        match *self {
            Predictor::None => None,
            Predictor::Oracle => Some(truth),
            Predictor::Recorded { ref values, .. } => {
                (!values.is_empty()).then(|| values[(index % values.len() as u64) as usize])
            }
            Predictor::LogNormal { mu, sigma, seed } => {
                let mut rng = StdRng::seed_from_u64(seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                let z: f64 = rng.sample(StandardNormal);
                Some((f64::from(truth) * (mu + sigma * z).exp()).round().max(1.0) as u32)
            }
        }
    }

    /// How a report names it, after the policy's name.
    pub fn label(&self) -> String {
        match self {
            Predictor::None => String::new(),
            Predictor::Oracle => " (oracle)".into(),
            Predictor::LogNormal { sigma, .. } => format!(" (predicted, σ={sigma})"),
            Predictor::Recorded { column, .. } => format!(" (predicted, {column})"),
        }
    }

    /// Request `index` of a stream as its policy is told of it: a generation's output cut at
    /// `max_tokens`, which is its cap, and its predicted length.
    pub fn tell_one(&self, index: u64, r: SimRequest, max_tokens: u32) -> SimRequest {
        match r.output_len.min(max_tokens) {
            0 => r,
            out => SimRequest { output_len: out, predicted: self.predict(index, out), max_tokens, ..r },
        }
    }

    /// [`Predictor::tell_one`] over a whole stream.
    pub fn tell(&self, requests: &[SimRequest], max_tokens: u32) -> Vec<SimRequest> {
        requests.iter().enumerate().map(|(i, r)| self.tell_one(i as u64, *r, max_tokens)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lognormal_predictions_are_seeded_per_request_and_spread_by_sigma() {
        let exact = Predictor::LogNormal { mu: 0.5_f64.ln(), sigma: 0.0, seed: 1 };
        assert_eq!(exact.predict(3, 100), Some(50));
        let noisy = Predictor::LogNormal { mu: 0.0, sigma: 1.0, seed: 1 };
        assert_eq!(noisy.predict(7, 100), noisy.predict(7, 100));
        let draws: Vec<f64> =
            (0..2000).map(|i| f64::from(noisy.predict(i, 1000).unwrap()).ln() - 1000f64.ln()).collect();
        let mean = draws.iter().sum::<f64>() / 2000.0;
        let std = (draws.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / 2000.0).sqrt();
        assert!(mean.abs() < 0.1 && (std - 1.0).abs() < 0.1, "mean {mean}, std {std}");
        assert_eq!(Predictor::None.predict(0, 10), None);
        assert_eq!(Predictor::Oracle.predict(0, 10), Some(10));
    }

    #[test]
    fn a_generation_is_cut_at_its_cap_not_the_cap_raised() {
        let stream =
            [SimRequest::new(morph_core::Time(0), 10, 50), SimRequest::new(morph_core::Time(1), 10, 500)];
        let told = Predictor::Oracle.tell(&stream, 100);
        assert_eq!(
            told.iter().map(|r| (r.output_len, r.max_tokens)).collect::<Vec<_>>(),
            vec![(50, 100), (100, 100)]
        );
        assert_eq!(told[1].predicted, Some(100));
    }

    #[test]
    fn recorded_predictions_replay_in_request_order_cycled() {
        let values = std::sync::Arc::new(vec![5, 9]);
        let recorded = Predictor::Recorded { path: "p.jsonl".into(), column: "regression-l1".into(), values };
        let got: Vec<Option<u32>> = (0..3).map(|i| recorded.predict(i, 100)).collect();
        assert_eq!(got, vec![Some(5), Some(9), Some(5)]);
    }
}
