//! The Runtime Scheduler's periodic step (§3.3): from the lengths seen over the last period,
//! Q_i per runtime, then the exact allocation of the G instances (Eq. 1–7).

use morph_core::{Nanos, RuntimeSpec};

use super::allocate::{RuntimeDemand, allocate};
use super::service::ServiceModel;

/// Request lengths seen since the last allocation, as a histogram by length.
#[derive(Debug, Clone)]
pub struct LengthWindow {
    pub histogram: Vec<u64>,
}

impl LengthWindow {
    pub fn new(max_len: u32) -> Self {
        Self { histogram: vec![0; max_len as usize + 1] }
    }

    pub fn record(&mut self, len: u32) {
        let at = (len as usize).min(self.histogram.len() - 1);
        self.histogram[at] += 1;
    }

    /// Requests per ideal runtime (the shortest of `runtimes`, ascending, that fits).
    pub fn per_runtime(&self, runtimes: &[RuntimeSpec]) -> Vec<u64> {
        let mut counts = vec![0; runtimes.len()];
        for (len, &n) in self.histogram.iter().enumerate() {
            let i = runtimes.partition_point(|r| (r.max_len as usize) < len).min(runtimes.len() - 1);
            counts[i] += n;
        }
        counts
    }

    pub fn clear(&mut self) {
        self.histogram.iter_mut().for_each(|c| *c = 0);
    }
}

/// N_i for `g` instances of `runtimes` (ascending max length), given the requests per runtime
/// observed over `span`. When the load is beyond what Eq. 3 allows (Σ⌊Q_i/M_i⌋ > G), the
/// demands are scaled down until it fits, so the instances are still split by need.
pub fn target(
    model: &ServiceModel,
    runtimes: &[RuntimeSpec],
    counts: &[u64],
    span: Nanos,
    g: usize,
) -> Vec<(RuntimeSpec, usize)> {
    if g == 0 || runtimes.is_empty() {
        return Vec::new();
    }
    // Q_i: mean requests per SLO period.
    let per_slo = model.slo() as f64 / span.max(1) as f64;
    let q: Vec<f64> = counts.iter().map(|c| *c as f64 * per_slo).collect();
    let m: Vec<f64> = runtimes.iter().map(|r| f64::from(model.capacity(*r))).collect();
    let curves: Vec<Box<dyn Fn(f64) -> f64>> = runtimes
        .iter()
        .map(|&r| Box::new(move |b: f64| model.mean_latency_ms(r, b)) as Box<dyn Fn(f64) -> f64>)
        .collect();
    let demands = |scale: f64| -> Vec<RuntimeDemand<'_>> {
        (0..runtimes.len())
            .map(|i| RuntimeDemand { demand: q[i] * scale, capacity: m[i], latency: &*curves[i] })
            .collect()
    };
    let need: f64 = q.iter().zip(&m).map(|(q, m)| q / m).sum();
    let allocation = allocate(g, &demands(1.0))
        .or_else(|| allocate(g, &demands((g as f64 - 1.0).max(0.0) / need.max(f64::MIN_POSITIVE))));
    match allocation {
        Some(a) => runtimes.iter().copied().zip(a.instances).collect(),
        None => vec![(runtimes[runtimes.len() - 1], g)],
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use morph_core::{Point, Profile};

    use super::*;

    fn model() -> ServiceModel {
        let p = Profile::from_points(
            "m",
            [Point { batch: 1, len: 64, ms: 1.0 }, Point { batch: 1, len: 512, ms: 4.0 }],
        )
        .unwrap();
        ServiceModel::new(Arc::new(p), 100_000_000)
    }

    #[test]
    fn splits_instances_by_the_observed_lengths() {
        let runtimes = [RuntimeSpec::fixed(64, 1), RuntimeSpec::fixed(512, 1)];
        let mut w = LengthWindow::new(512);
        for _ in 0..9_000 {
            w.record(30);
        }
        for _ in 0..1_000 {
            w.record(400);
        }
        let counts = w.per_runtime(&runtimes);
        assert_eq!(counts, vec![9_000, 1_000]);
        // 10 000 requests in 10 s at a 100 ms SLO: Q = (90, 10); M = (100, 25).
        let t = target(&model(), &runtimes, &counts, 10_000_000_000, 4);
        assert_eq!(t.iter().map(|(_, n)| *n).sum::<usize>(), 4);
        assert!(t[1].1 >= 1 && t[0].1 >= 1, "{t:?}");
        // Overload (Eq. 3 infeasible with 2 instances) still splits by need.
        let t = target(&model(), &runtimes, &[90_000, 10_000], 10_000_000_000, 2);
        assert_eq!(t.iter().map(|(_, n)| *n).collect::<Vec<_>>(), vec![1, 1]);
    }
}
