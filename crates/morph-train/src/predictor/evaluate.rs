//! How good a length predictor is, as SSJF's Table 2 reports it: accuracy and macro F1 over the
//! five percentile buckets, and the mean absolute error in tokens; beside them, how well the
//! predictions order the requests (Spearman's rank correlation), which is all SJF uses.

use morph_encoder::predictor::head::{Buckets, Scores};

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
    Scores {
        accuracy: correct as f64 / n,
        macro_f1: f1s.sum::<f64>() / 5.0,
        mae_tokens: mae,
        spearman: pearson(&ranks(predicted), &ranks(truth)),
    }
}

/// 1-based ranks, ties given the mean of the ranks they span.
fn ranks(values: &[u32]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by_key(|&i| values[i]);
    let mut ranks = vec![0.0; values.len()];
    let mut before = 0;
    for tie in order.chunk_by(|&a, &b| values[a] == values[b]) {
        let mean = before as f64 + (tie.len() as f64 + 1.0) / 2.0;
        for &i in tie {
            ranks[i] = mean;
        }
        before += tie.len();
    }
    ranks
}

/// Pearson's correlation of `x` and `y`; 0 where either does not vary.
fn pearson(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len().max(1) as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let cov: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let (vx, vy): (f64, f64) =
        (x.iter().map(|a| (a - mx).powi(2)).sum(), y.iter().map(|b| (b - my).powi(2)).sum());
    if vx == 0.0 || vy == 0.0 { 0.0 } else { cov / (vx * vy).sqrt() }
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
        assert_eq!((perfect.spearman, constant.spearman), (1.0, 0.0));
    }

    /// Ties share their mean rank: [10, 20, 20, 30] ranks 1, 2.5, 2.5, 4. Reversed order is −1;
    /// any increasing map of the truth is +1.
    #[test]
    fn rank_correlation_reads_order_only() {
        assert_eq!(ranks(&[30, 20, 10, 20]), vec![4.0, 2.5, 1.0, 2.5]);
        let truth = [5, 60, 256, 256, 120, 30];
        let buckets = Buckets::from_lengths(&truth);
        let squared: Vec<u32> = truth.iter().map(|t| t * t).collect();
        assert!((score(&buckets, &squared, &truth).spearman - 1.0).abs() < 1e-12);
        let reversed: Vec<u32> = truth.iter().map(|t| 1000 - t).collect();
        assert!((score(&buckets, &reversed, &truth).spearman + 1.0).abs() < 1e-12);
    }
}
