//! The Runtime Scheduler's periodic step (§3.3): from the lengths seen over the last period,
//! Q_i per runtime, then the exact allocation of the G instances (Eq. 1–7).

use morph_core::{Nanos, RuntimeSpec};

use super::allocate::{Floors, RuntimeDemand, allocate};
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

/// How the allocation counts what a runtime can serve.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Accounting {
    /// The paper: M_i at ρ = 1, Eq. 3's floors; past them the demands are scaled down until the
    /// floors fit, so the instances are still split by need.
    Paper,
    /// Morph's stable accounting: M_i at utilisation `u`, so demand past it carries (Eq. 4) to
    /// the longer runtimes that late binding will hand it to, and overload of the longest runtime
    /// is priced by [`ServiceModel::stable_latency_ms`] (each runtime's instances one pooled
    /// queue); Eq. 7's floor only.
    Stable { utilisation: f64 },
}

/// N_i for `g` instances of `runtimes` (ascending max length), given the requests per runtime
/// observed over `span`.
pub fn target(
    model: &ServiceModel,
    runtimes: &[RuntimeSpec],
    counts: &[u64],
    span: Nanos,
    g: usize,
    accounting: Accounting,
) -> Vec<(RuntimeSpec, usize)> {
    if g == 0 || runtimes.is_empty() {
        return Vec::new();
    }
    // Q_i: mean requests per SLO period.
    let per_slo = model.slo() as f64 / span.max(1) as f64;
    let q: Vec<f64> = counts.iter().map(|c| *c as f64 * per_slo).collect();
    let m: Vec<f64> = runtimes
        .iter()
        .map(|r| match accounting {
            Accounting::Paper => f64::from(model.capacity(*r)),
            Accounting::Stable { utilisation } => model.stable_capacity(*r, utilisation),
        })
        .collect();
    let curves: Vec<Box<dyn Fn(f64, usize) -> f64>> = runtimes
        .iter()
        .map(|&r| match accounting {
            // The paper: each instance an M/D/1 queue of its own.
            Accounting::Paper => {
                Box::new(move |b: f64, _| model.mean_latency_ms(r, b)) as Box<dyn Fn(f64, usize) -> f64>
            }
            Accounting::Stable { utilisation } => {
                Box::new(move |b: f64, n: usize| model.stable_latency_ms(r, b, n, utilisation))
            }
        })
        .collect();
    let demands = |scale: f64| -> Vec<RuntimeDemand<'_>> {
        (0..runtimes.len())
            .map(|i| RuntimeDemand { demand: q[i] * scale, capacity: m[i], latency: &*curves[i] })
            .collect()
    };
    let allocation = match accounting {
        Accounting::Paper => {
            let need: f64 = q.iter().zip(&m).map(|(q, m)| q / m).sum();
            let scaled = (g as f64 - 1.0).max(0.0) / need.max(f64::MIN_POSITIVE);
            allocate(g, &demands(1.0), Floors::Eq3).or_else(|| allocate(g, &demands(scaled), Floors::Eq3))
        }
        Accounting::Stable { .. } => allocate(g, &demands(1.0), Floors::Eq7),
    };
    match allocation {
        Some(a) => runtimes.iter().copied().zip(a.instances).collect(),
        None => vec![(runtimes[runtimes.len() - 1], g)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> ServiceModel {
        super::super::service::two_point_model()
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
        let t = target(&model(), &runtimes, &counts, 10_000_000_000, 4, Accounting::Paper);
        assert_eq!(t.iter().map(|(_, n)| *n).sum::<usize>(), 4);
        assert!(t[1].1 >= 1 && t[0].1 >= 1, "{t:?}");
        // Overload (Eq. 3 infeasible with 2 instances) still splits by need.
        let t = target(&model(), &runtimes, &[90_000, 10_000], 10_000_000_000, 2, Accounting::Paper);
        assert_eq!(t.iter().map(|(_, n)| *n).collect::<Vec<_>>(), vec![1, 1]);
    }

    /// A hand-made overload: 3 instances, SLO 100 ms, a 64-token runtime (1 ms) and a 512-token
    /// one (4 ms); per SLO, Q = (200, 4). The paper counts M_64 = 100 at ρ = 1, so two short
    /// instances "serve" all 200 and nothing carries. The stable accounting (u = 0.9) counts 90
    /// each: 20 requests carry (Eq. 4) to the long instance, whose 24 put it at ρ = 0.96, past
    /// u, and the objective prices that overload, the two short instances as one pooled queue:
    /// exactly as computed by hand below.
    #[test]
    fn the_stable_accounting_carries_demotion_to_the_longer_runtime_and_prices_it() {
        let m = model();
        let (short, long) = (RuntimeSpec::fixed(64, 1), RuntimeSpec::fixed(512, 1));
        let u = 0.9;
        let m = &m;
        let curve = |r: RuntimeSpec| move |b: f64, n: usize| m.stable_latency_ms(r, b, n, u);
        let curves = [curve(short), curve(long)];
        let stable = [
            RuntimeDemand { demand: 200.0, capacity: m.stable_capacity(short, u), latency: &curves[0] },
            RuntimeDemand { demand: 4.0, capacity: m.stable_capacity(long, u), latency: &curves[1] },
        ];
        let a = allocate(3, &stable, Floors::Eq7).unwrap();
        assert_eq!(a.instances, vec![2, 1], "moving a short instance to the long runtime carries 110");
        // Short: 180 served by 2 pooled instances at ρ = 0.9 (M/D/2, a = 1.8 erlangs): Erlang B
        // B_1 = 1.8/2.8, B_2 = 1.8·B_1/(2 + 1.8·B_1) = 81/221; C = B_2/(1 − 0.9·(1 − B_2)) = 81/95;
        // W = ½·C/(2μ − λ) = ½·(81/95)/200 s; L = 1 + 1000·81/38000 ms.
        // Long: 20 carried + 4 = 24 at ρ = 0.96: L = 4 + 0.9·4/0.2 + 1000·100·(0.96 − 0.9) = 6022 ms.
        let by_hand = 180.0 * (1.0 + 81.0 / 38.0) + 24.0 * (22.0 + 6_000.0);
        assert!((a.cost - by_hand).abs() < 1e-6 * by_hand, "{} vs {by_hand}", a.cost);
        // The paper's accounting sees no carry: the long runtime serves only its own 4.
        let paper = target(m, &[short, long], &[2_000, 40], 1_000_000_000, 3, Accounting::Paper);
        assert_eq!(paper.iter().map(|(_, n)| *n).collect::<Vec<_>>(), vec![2, 1]);
        let m_paper = f64::from(m.capacity(short));
        assert_eq!(2.0 * m_paper, 200.0, "two short instances are 'full' at ρ = 1, with nothing carried");
        let stable =
            target(m, &[short, long], &[2_000, 40], 1_000_000_000, 3, Accounting::Stable { utilisation: u });
        assert_eq!(stable, vec![(short, 2), (long, 1)]);
    }
}
