//! Which max lengths to build runtimes for (§3.3, "Determine the max length of each runtime").
//!
//! - [`staircase`]: the paper's rule. Latency of static shapes rises in steps (64 tokens for
//!   TensorRT BERT); runtimes go up linearly at the step width, max/step of them. A profile with
//!   no staircase (a smooth CPU curve) gets `fallback` evenly spaced runtimes instead.
//! - [`optimised`]: bucket bounds chosen by a DP over a length histogram that minimises the
//!   expected service time, for every k; [`knee`] picks k where the gain flattens.

use morph_core::{LatencyProfile, PaddedShape};

/// A latency rise of at least this much between neighbouring profiled lengths is a step; less
/// is flat (the paper: "within each 64 length step, the latency change is tiny, usually less
/// than 5%").
const STEP_RISE: f64 = 0.05;

/// A width is the staircase's when at least this share of the total rise (in log latency)
/// happens at its multiples.
const WIDTH_SHARE: f64 = 0.6;

/// The staircase width of `profile` at batch 1, if its latency has one: the largest power of
/// two (≥ 8) at whose multiples most of the rise happens, when most neighbouring profiled
/// points are flat. Measured tables are noisy (the GPU table also rises at 16 and 80), so the
/// width is the one carrying most of the rise rather than the gcd of every step.
pub fn staircase_width(profile: &LatencyProfile) -> Option<u32> {
    let lens = profile.lengths();
    let mut steps: Vec<(u32, f64)> = Vec::new();
    let mut flats = 0;
    for pair in lens.windows(2) {
        let (a, b) = (
            profile.latency_ms(PaddedShape { len: pair[0], batch: 1 }),
            profile.latency_ms(PaddedShape { len: pair[1], batch: 1 }),
        );
        if b >= a * (1.0 + STEP_RISE) {
            // The boundary: the multiple of 8 in (a, b], where tiles end.
            steps.push((pair[1].saturating_sub(1).next_multiple_of(8), (b / a).ln()));
        } else {
            flats += 1;
        }
    }
    if steps.len() < 2 || flats < steps.len() {
        return None;
    }
    let total: f64 = steps.iter().map(|(_, rise)| rise).sum();
    let max_len = lens.last().copied().unwrap_or(0);
    (3..16)
        .map(|p| 1u32 << p)
        .take_while(|w| *w <= max_len / 2)
        .filter(|w| {
            let at: f64 = steps.iter().filter(|(b, _)| b % w == 0).map(|(_, rise)| rise).sum();
            at >= WIDTH_SHARE * total
        })
        .last()
}

/// The paper's rule: runtimes at w, 2w, …, up to `max_len`, where w is the staircase width, or
/// `max_len / fallback` when the profile has no staircase.
pub fn staircase(profile: &LatencyProfile, max_len: u32, fallback: u32) -> Vec<u32> {
    let width = staircase_width(profile).unwrap_or_else(|| max_len.div_ceil(fallback.max(1)));
    let mut lens: Vec<u32> = (1..).map(|k| k * width).take_while(|l| *l < max_len).collect();
    lens.push(max_len);
    lens
}

/// For each k in 1..=`max_k`: the k bounds (ascending, the last `max_len`) minimising
/// Σ count(len) · cost(bound(len)), where bound(len) is the smallest bound ≥ len, and that
/// expected cost per request. Bounds are multiples of `granularity`. `histogram[len]` counts
/// requests of `len` tokens (lengths over `max_len` are ignored).
pub fn optimised(
    histogram: &[u64],
    max_len: u32,
    granularity: u32,
    max_k: usize,
    cost: &dyn Fn(u32) -> f64,
) -> Vec<(Vec<u32>, f64)> {
    let g = granularity.max(1);
    let bounds: Vec<u32> = (1..).map(|k| k * g).take_while(|b| *b < max_len).chain([max_len]).collect();
    let n = bounds.len();
    // weight[j]: requests whose smallest bound is bounds[j].
    let mut weight = vec![0.0; n];
    for (len, &count) in histogram.iter().enumerate().take(max_len as usize + 1) {
        let j = bounds.partition_point(|b| (*b as usize) < len);
        weight[j] += count as f64;
    }
    let total: f64 = weight.iter().sum::<f64>().max(1.0);
    // Cost of serving bounds (a, b] on a runtime of max length bounds[b].
    let mut prefix = vec![0.0; n + 1];
    for j in 0..n {
        prefix[j + 1] = prefix[j] + weight[j];
    }
    let segment = |a: usize, b: usize| (prefix[b + 1] - prefix[a]) * cost(bounds[b]);
    // best[k][j]: least cost covering bounds[0..=j] with k runtimes, the last at bounds[j].
    let mut best = vec![vec![f64::INFINITY; n]; max_k + 1];
    let mut parent = vec![vec![usize::MAX; n]; max_k + 1];
    for (j, cell) in best[1].iter_mut().enumerate() {
        *cell = segment(0, j);
    }
    for k in 2..=max_k {
        for j in 0..n {
            for i in 0..j {
                let c = best[k - 1][i] + segment(i + 1, j);
                if c < best[k][j] {
                    (best[k][j], parent[k][j]) = (c, i);
                }
            }
        }
    }
    (1..=max_k.min(n))
        .map(|k| {
            let mut lens = Vec::with_capacity(k);
            let mut j = n - 1;
            for level in (1..=k).rev() {
                lens.push(bounds[j]);
                j = parent[level][j];
            }
            lens.reverse();
            (lens, best[k][n - 1] / total)
        })
        .collect()
}

/// The smallest k after which one more runtime improves the expected cost by less than
/// `min_gain` (a fraction): the knee of the cost-vs-k curve. `costs[k-1]` is the cost with k.
pub fn knee(costs: &[f64], min_gain: f64) -> usize {
    for k in 1..costs.len() {
        if costs[k - 1] - costs[k] < min_gain * costs[k - 1] {
            return k;
        }
    }
    costs.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use morph_core::Point;

    /// A staircase: flat within 64-token steps, +20% at each.
    fn stairs() -> LatencyProfile {
        let points = (0..32).map(|i| {
            let len = 1 + i * 16;
            Point { batch: 1, len, ms: 1.0 + 0.2 * f64::from((len - 1) / 64) }
        });
        LatencyProfile::from_points("stairs", points).unwrap()
    }

    #[test]
    fn the_gpu_table_has_a_64_token_staircase() {
        let path = morph_assets::shared_data().join("profiles/distilbert_trt_gpu_bs1-64_seq1-512.json");
        let gpu = LatencyProfile::load(&path).expect("the shared GPU table");
        assert_eq!(staircase_width(&gpu), Some(64));
        let cpu = LatencyProfile::load(&morph_assets::path("profiles/minilm_candle_cpu_2core.json")).unwrap();
        assert_eq!(staircase_width(&cpu), None, "the CPU curve is smooth");
    }

    #[test]
    fn the_papers_rule_finds_the_64_token_staircase() {
        assert_eq!(staircase_width(&stairs()), Some(64));
        assert_eq!(staircase(&stairs(), 512, 8), vec![64, 128, 192, 256, 320, 384, 448, 512]);
        // A smooth curve (every point rises): no staircase, eight even runtimes.
        let points = (0..8).map(|i| Point { batch: 1, len: 8 << i, ms: f64::from(1 << i) });
        let smooth = LatencyProfile::from_points("smooth", points).unwrap();
        assert_eq!(staircase_width(&smooth), None);
        assert_eq!(staircase(&smooth, 512, 4), vec![128, 256, 384, 512]);
    }

    #[test]
    fn the_dp_matches_brute_force_on_two_runtimes() {
        let mut hist = vec![0u64; 129];
        for (len, count) in [(5, 40), (20, 30), (60, 10), (100, 5), (128, 15)] {
            hist[len] = count;
        }
        let cost = |b: u32| 1.0 + f64::from(b) / 32.0;
        let sets = optimised(&hist, 128, 8, 3, &cost);
        let expected = |lens: &[u32]| -> f64 {
            let total: u64 = hist.iter().sum();
            let sum: f64 = hist
                .iter()
                .enumerate()
                .map(|(l, c)| *c as f64 * cost(*lens.iter().find(|b| **b as usize >= l).unwrap()))
                .sum();
            sum / total as f64
        };
        let brute =
            (1..16u32).map(|i| vec![i * 8, 128]).min_by(|a, b| expected(a).total_cmp(&expected(b))).unwrap();
        assert_eq!(sets[0].0, vec![128]);
        assert_eq!(sets[1].0, brute);
        assert!((sets[1].1 - expected(&brute)).abs() < 1e-9);
        assert!(sets[2].1 <= sets[1].1 && sets[1].1 <= sets[0].1);
        assert_eq!(knee(&[10.0, 5.0, 4.0, 3.99], 0.05), 3);
    }
}
