//! How good a length predictor is, as SSJF's Table 2 reports it: accuracy and macro F1 over the
//! five percentile buckets, and the mean absolute error in tokens.

use serde::{Deserialize, Serialize};

use super::head::Buckets;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Scores {
    pub accuracy: f64,
    pub macro_f1: f64,
    pub mae_tokens: f64,
}

pub fn score(buckets: &Buckets, predicted: &[u32], truth: &[u32]) -> Scores {
    let mut confusion = [[0usize; 5]; 5];
    for (&p, &t) in predicted.iter().zip(truth) {
        confusion[buckets.of(t)][buckets.of(p)] += 1;
    }
    let n = truth.len().max(1) as f64;
    let correct: usize = (0..5).map(|k| confusion[k][k]).sum();
    let f1s = (0..5).map(|k| {
        let tp = confusion[k][k] as f64;
        let predicted_k: usize = (0..5).map(|t| confusion[t][k]).sum();
        let actual_k: usize = confusion[k].iter().sum();
        let (precision, recall) = (tp / predicted_k.max(1) as f64, tp / actual_k.max(1) as f64);
        if precision + recall > 0.0 { 2.0 * precision * recall / (precision + recall) } else { 0.0 }
    });
    let mae = predicted.iter().zip(truth).map(|(&p, &t)| f64::from(p.abs_diff(t))).sum::<f64>() / n;
    Scores { accuracy: correct as f64 / n, macro_f1: f1s.sum::<f64>() / 5.0, mae_tokens: mae }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perfect_and_constant_predictions() {
        let truth: Vec<u32> = (1..=100).collect();
        let buckets = Buckets::from_lengths(&truth);
        let perfect = score(&buckets, &truth, &truth);
        assert_eq!((perfect.accuracy, perfect.macro_f1, perfect.mae_tokens), (1.0, 1.0, 0.0));
        let constant = score(&buckets, &vec![50; 100], &truth);
        assert!((constant.accuracy - 0.2).abs() < 0.02, "{constant:?}");
        assert!(constant.macro_f1 < 0.2, "{constant:?}");
        assert!((constant.mae_tokens - 25.0).abs() < 1.0, "{constant:?}");
    }
}
