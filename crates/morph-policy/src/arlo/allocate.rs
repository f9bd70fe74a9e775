//! Arlo's Runtime Scheduler allocation (§3.3, Eq. 1–7), solved exactly.
//!
//! Given G instances and I runtimes in increasing `max_length`, with Q_i the mean requests per
//! SLO period whose ideal runtime is i, M_i the most requests one instance of runtime i serves
//! within the SLO and L_i(B) the mean latency of an instance of runtime i at load B, choose N_i:
//!
//! ```text
//! min Σ L_i(B_i)·C_i                                   (Eq. 1)
//! Σ N_i = G                                            (Eq. 2)
//! N_i ≥ ⌊Q_i / M_i⌋                                    (Eq. 3)
//! R_0 = 0,  R_i = max(R_{i−1} + Q_i − N_i·M_i, 0)      (Eq. 4: demand carried to longer runtimes)
//! C_i = min(R_{i−1} + Q_i, N_i·M_i) for i < I,  C_I = R_{I−1} + Q_I     (Eq. 5)
//! B_i = C_i / N_i                                      (Eq. 6)
//! N_I ≥ 1                                              (Eq. 7)
//! ```
//!
//! With [`Floors::Eq7`] the floors of Eq. 3 are dropped and only Eq. 7 holds: Morph's stable
//! accounting (`super::reallocate`), where a runtime's capacity is what it serves at a target
//! utilisation and the curves themselves price overload, so an overloaded cluster is still split
//! by where demotion will push its demand instead of by scaled-down demands.
//!
//! Solver: a dynamic program over runtimes whose state is (instances used so far, carried demand
//! R). The cost still to come never decreases when R grows (more carried demand means more
//! load on every later runtime, and each L_i is non-decreasing), so a state with no more R and
//! no more cost than another dominates it; each layer keeps only the Pareto front. Exact under
//! that monotonicity, which holds for latency-vs-load curves.

/// One runtime's inputs.
pub struct RuntimeDemand<'a> {
    /// Q_i.
    pub demand: f64,
    /// M_i, > 0.
    pub capacity: f64,
    /// L_i: mean latency at a per-instance load B (non-decreasing).
    pub latency: &'a dyn Fn(f64) -> f64,
}

impl std::fmt::Debug for RuntimeDemand<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RuntimeDemand(Q={}, M={})", self.demand, self.capacity)
    }
}

/// Which lower bounds on N_i hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Floors {
    /// Eq. 3 and Eq. 7: N_i ≥ ⌊Q_i / M_i⌋, N_I ≥ 1 (the paper).
    Eq3,
    /// Eq. 7 only: N_I ≥ 1.
    Eq7,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Allocation {
    /// N_i per runtime.
    pub instances: Vec<usize>,
    /// The objective, Σ L_i(B_i)·C_i.
    pub cost: f64,
}

/// Eq. 4–6 for one runtime: `(R_i, L_i(B_i)·C_i)` from `R_{i−1}` and `N_i`; `None` if the last
/// runtime would have demand and no instance.
fn step(r: &RuntimeDemand, carried: f64, n: usize, last: bool) -> Option<(f64, f64)> {
    let offered = carried + r.demand;
    let served = if last { offered } else { offered.min(n as f64 * r.capacity) };
    let rest = if last { 0.0 } else { (offered - n as f64 * r.capacity).max(0.0) };
    if n == 0 {
        return if served > 0.0 { None } else { Some((rest, 0.0)) };
    }
    Some((rest, (r.latency)(served / n as f64) * served))
}

/// Eq. 3 (with [`Floors::Eq3`]) and Eq. 7: the fewest instances runtime `i` may get.
fn lower_bound(runtimes: &[RuntimeDemand], i: usize, floors: Floors) -> usize {
    let floor = match floors {
        Floors::Eq3 => (runtimes[i].demand / runtimes[i].capacity).floor() as usize,
        Floors::Eq7 => 0,
    };
    if i + 1 == runtimes.len() { floor.max(1) } else { floor }
}

#[derive(Debug, Clone, Copy)]
struct State {
    carried: f64,
    cost: f64,
    /// (instances used before this runtime, index of the parent state there, N_i).
    parent: Option<(usize, usize, usize)>,
}

/// Keeps the states not dominated in (carried, cost).
fn pareto(mut states: Vec<State>) -> Vec<State> {
    states.sort_by(|a, b| a.carried.total_cmp(&b.carried).then(a.cost.total_cmp(&b.cost)));
    let mut front: Vec<State> = Vec::new();
    for s in states {
        if front.last().is_none_or(|f| s.cost < f.cost) {
            front.push(s);
        }
    }
    front
}

/// The exact optimum of Eq. 1–7 under `floors`, or `None` if the constraints cannot all hold
/// (Σ ⌊Q_i/M_i⌋ > G, or no runtime).
pub fn allocate(instances: usize, runtimes: &[RuntimeDemand], floors: Floors) -> Option<Allocation> {
    let k = runtimes.len();
    if k == 0 {
        return None;
    }
    let bounds: Vec<usize> = (0..k).map(|i| lower_bound(runtimes, i, floors)).collect();
    // suffix[i]: instances the runtimes from i on need at least.
    let mut suffix = vec![0; k + 1];
    for i in (0..k).rev() {
        suffix[i] = suffix[i + 1] + bounds[i];
    }
    if suffix[0] > instances {
        return None;
    }
    // layers[i][g]: Pareto front after runtimes 0..i using g instances.
    let mut layers: Vec<Vec<Vec<State>>> = vec![vec![Vec::new(); instances + 1]; k + 1];
    layers[0][0].push(State { carried: 0.0, cost: 0.0, parent: None });
    for i in 0..k {
        let last = i + 1 == k;
        let mut next: Vec<Vec<State>> = vec![Vec::new(); instances + 1];
        for (used, front) in layers[i].iter().enumerate() {
            let Some(room) = instances.checked_sub(used + suffix[i + 1]) else { continue };
            let choices = if last { room..=room } else { bounds[i]..=room };
            for (at, s) in front.iter().enumerate() {
                for n in choices.clone() {
                    if n < bounds[i] {
                        continue;
                    }
                    let Some((carried, term)) = step(&runtimes[i], s.carried, n, last) else { continue };
                    let parent = Some((used, at, n));
                    next[used + n].push(State { carried, cost: s.cost + term, parent });
                }
            }
        }
        layers[i + 1] = next.into_iter().map(pareto).collect();
    }
    let best = layers[k][instances].iter().enumerate().min_by(|a, b| a.1.cost.total_cmp(&b.1.cost))?;
    let cost = best.1.cost;
    let mut counts = vec![0; k];
    let (mut g, mut at) = (instances, best.0);
    for i in (0..k).rev() {
        let (used, parent_at, n) = layers[i + 1][g][at].parent?;
        counts[i] = n;
        (g, at) = (used, parent_at);
    }
    Some(Allocation { instances: counts, cost })
}

/// Eq. 1 for a given allocation, checking Eq. 2, 3 (under `floors`) and 7; `None` if it
/// violates them.
pub fn objective(
    instances: usize,
    runtimes: &[RuntimeDemand],
    counts: &[usize],
    floors: Floors,
) -> Option<f64> {
    if counts.len() != runtimes.len() || counts.iter().sum::<usize>() != instances {
        return None;
    }
    let (mut carried, mut cost) = (0.0, 0.0);
    for (i, (r, &n)) in runtimes.iter().zip(counts).enumerate() {
        if n < lower_bound(runtimes, i, floors) {
            return None;
        }
        let (rest, term) = step(r, carried, n, i + 1 == runtimes.len())?;
        (carried, cost) = (rest, cost + term);
    }
    Some(cost)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every composition of `total` into `parts` non-negative integers.
    fn compositions(total: usize, parts: usize) -> Vec<Vec<usize>> {
        if parts == 1 {
            return vec![vec![total]];
        }
        (0..=total)
            .flat_map(|first| {
                compositions(total - first, parts - 1).into_iter().map(move |mut rest| {
                    rest.insert(0, first);
                    rest
                })
            })
            .collect()
    }

    fn brute_force(instances: usize, runtimes: &[RuntimeDemand], floors: Floors) -> Option<f64> {
        compositions(instances, runtimes.len())
            .iter()
            .filter_map(|c| objective(instances, runtimes, c, floors))
            .min_by(f64::total_cmp)
    }

    /// A small deterministic generator for test cases.
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> f64 {
            self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (self.0 >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    #[test]
    fn equals_brute_force_on_small_instances() {
        let mut rng = Lcg(7);
        let mut checked = 0;
        for case in 0..400 {
            let k = 1 + case % 4;
            let g = 1 + (case / 4) % 8;
            // Latency grows with the runtime's length and with load (queueing-like).
            let bases: Vec<f64> = (0..k).map(|i| 1.0 + i as f64 * (0.5 + rng.next())).collect();
            let curves: Vec<Box<dyn Fn(f64) -> f64>> = bases
                .iter()
                .map(|&b| {
                    Box::new(move |load: f64| b * (1.0 + 0.3 * load + 0.05 * load * load))
                        as Box<dyn Fn(f64) -> f64>
                })
                .collect();
            let runtimes: Vec<RuntimeDemand> = (0..k)
                .map(|i| RuntimeDemand {
                    demand: rng.next() * 6.0,
                    capacity: 1.0 + rng.next() * 3.0,
                    latency: curves[i].as_ref(),
                })
                .collect();
            let floors = if case % 2 == 0 { Floors::Eq3 } else { Floors::Eq7 };
            let want = brute_force(g, &runtimes, floors);
            let got = allocate(g, &runtimes, floors);
            match (want, &got) {
                (None, None) => {}
                (Some(w), Some(a)) => {
                    assert!(
                        (a.cost - w).abs() <= 1e-9 * w.max(1.0),
                        "case {case}: dp {a:?} vs brute force {w}"
                    );
                    assert_eq!(objective(g, &runtimes, &a.instances, floors), Some(a.cost), "case {case}");
                    checked += 1;
                }
                _ => panic!("case {case}: dp {got:?} vs brute force {want:?}"),
            }
        }
        assert!(checked > 300, "only {checked} feasible cases");
    }

    #[test]
    fn infeasible_when_the_lower_bounds_exceed_the_cluster() {
        let flat = |_: f64| 1.0;
        let r = |demand| RuntimeDemand { demand, capacity: 1.0, latency: &flat };
        assert_eq!(allocate(3, &[r(2.0), r(2.0)], Floors::Eq3), None);
        assert!(allocate(4, &[r(2.0), r(2.0)], Floors::Eq3).is_some());
        assert!(allocate(3, &[r(2.0), r(2.0)], Floors::Eq7).is_some(), "without Eq. 3, overload is priced");
        assert_eq!(allocate(0, &[r(0.0)], Floors::Eq7), None, "Eq. 7: the longest runtime needs an instance");
    }
}
