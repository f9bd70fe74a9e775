//! Morph's default batching on one host, read off the engine's measured profile: length
//! buckets whose padding costs little, rows per bucket that still buy throughput, and which
//! layout of the cores (one instance on all of them, or one per core) serves more.

use morph_core::{LatencyProfile, PaddedShape};

use crate::Bucket;

/// Padding up to a bucket's bound may cost at most this much more than the batch of its
/// shortest inputs would (ε).
pub const PAD_COST: f64 = 0.25;
/// A batch takes the fewest rows that serve within this share of the best rate measured at
/// its length (more rows would only add latency).
pub const MIN_GAIN: f64 = 0.05;
/// Input lengths a layout's throughput is compared on.
const COMPARED_LENS: [u32; 4] = [16, 32, 64, 128];

/// Buckets, and the most rows any of them batches (the runtime's batch size).
#[derive(Debug, Clone, PartialEq)]
pub struct LengthPlan {
    pub buckets: Vec<Bucket>,
    pub max_rows: u32,
}

fn latency(profile: &LatencyProfile, batch: u32, len: u32) -> f64 {
    profile.latency_ms(PaddedShape { batch, len })
}

/// The rows a batch of `len`-token inputs is worth: the fewest of the profile's batch sizes
/// that serve within [`MIN_GAIN`] of the best rate (sequences per second) at that length.
pub fn rows_worth(profile: &LatencyProfile, len: u32) -> u32 {
    let rate = |b: u32| f64::from(b) / latency(profile, b, len);
    let best = profile.batches().map(rate).fold(0.0, f64::max);
    profile.batches().find(|&b| rate(b) >= best * (1.0 - MIN_GAIN)).unwrap_or(1)
}

/// Buckets up to `max_len`: each starts past the last bound, takes the rows worth batching at
/// its shortest input, and reaches as far as a batch padded to its bound costs at most
/// (1 + [`PAD_COST`]) × that batch at its shortest input.
pub fn length_plan(profile: &LatencyProfile, max_len: u32) -> LengthPlan {
    let mut buckets = Vec::new();
    let mut shortest = 1;
    while shortest <= max_len {
        let rows = rows_worth(profile, shortest);
        let budget = latency(profile, rows, shortest) * (1.0 + PAD_COST);
        let reach = (shortest..=max_len).take_while(|&len| latency(profile, rows, len) <= budget).last();
        let max_len_here = reach.unwrap_or(shortest);
        buckets.push(Bucket { max_len: max_len_here, max_rows: rows });
        shortest = max_len_here + 1;
    }
    let max_rows = buckets.iter().map(|b| b.max_rows).max().unwrap_or(1);
    LengthPlan { buckets, max_rows }
}

/// Sequences per second the host serves with `instances` instances of the layout `profile`
/// measured (each instance's latency taken with the others running), mean over a few lengths
/// at the rows worth batching there.
pub fn layout_rate(profile: &LatencyProfile, instances: u32) -> f64 {
    let rates = COMPARED_LENS.map(|len| {
        let rows = rows_worth(profile, len);
        f64::from(instances * rows) * 1e3 / latency(profile, rows, len)
    });
    rates.iter().sum::<f64>() / rates.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    use morph_core::fixtures::linear_profile as linear;

    #[test]
    fn rows_stop_where_a_bigger_batch_buys_little() {
        // fixed 2 ms, 0.25 ms/token: at 16 tokens b8 serves 8/34 = 0.235/ms, within 5% of b16's
        // 16/66 = 0.242 (b4: 0.222 is not), so 8 rows; at 512 tokens every batch is
        // token-bound: 1 row.
        let p = linear(2.0, 0.25);
        assert_eq!(rows_worth(&p, 16), 8);
        assert_eq!(rows_worth(&p, 512), 1);
    }

    #[test]
    fn buckets_cover_every_length_once_and_pad_at_most_the_budget() {
        let p = linear(2.0, 0.25);
        let plan = length_plan(&p, 512);
        assert_eq!(plan.buckets.last().unwrap().max_len, 512);
        assert!(plan.buckets.windows(2).all(|w| w[0].max_len < w[1].max_len));
        let mut shortest = 1;
        for b in &plan.buckets {
            let cost = |len| latency(&p, b.max_rows, len);
            assert!(cost(b.max_len) <= cost(shortest) * (1.0 + PAD_COST) + 1e-9);
            // the bound is as far as the budget reaches (the next length would break it)
            if b.max_len < 512 {
                assert!(cost(b.max_len + 1) > cost(shortest) * (1.0 + PAD_COST));
            }
            shortest = b.max_len + 1;
        }
        assert_eq!(plan.max_rows, plan.buckets.iter().map(|b| b.max_rows).max().unwrap());
    }

    #[test]
    fn a_layout_of_instances_per_core_wins_when_each_keeps_its_speed() {
        // Two one-thread instances each as fast as one two-thread instance is: twice the rate.
        let p = linear(2.0, 0.25);
        assert!((layout_rate(&p, 2) / layout_rate(&p, 1) - 2.0).abs() < 1e-9);
    }
}
