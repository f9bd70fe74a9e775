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
    /// L_i: mean latency at a per-instance load B on N_i instances (non-decreasing in B).
    pub latency: &'a dyn Fn(f64, usize) -> f64,
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
    Some((rest, (r.latency)(served / n as f64, n) * served))
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

/// A DP state as [`pareto`] compares it: its carried demand R, its cost so far, and the
/// instances it used (the last tie-break: fewer first).
trait Carrying {
    fn key(&self) -> (f64, f64, usize);
}

impl Carrying for State {
    fn key(&self) -> (f64, f64, usize) {
        (self.carried, self.cost, 0)
    }
}

/// Keeps the states no other dominates. A carries R_A ≤ R_B at cost c_A; every request B carries
/// beyond A is served later at no less than `idle`, the least idle latency L_j(0) of the runtimes
/// still to come, and raises no other latency less than A's plan would (the carry recursion and
/// each L_j are monotone), so B's best completion costs at least A's plus `idle`·(R_B − R_A):
/// B is dominated if c_A + idle·R_A ≤ c_B + idle·R_B. (With `idle` = 0, the plain Pareto front.)
fn pareto<S: Carrying>(mut states: Vec<S>, idle: f64) -> Vec<S> {
    states.sort_by(|a, b| {
        let ((ra, ca, na), (rb, cb, nb)) = (a.key(), b.key());
        ra.total_cmp(&rb).then(ca.total_cmp(&cb)).then(na.cmp(&nb))
    });
    let mut best = f64::INFINITY;
    states.retain(|s| {
        let (carried, cost, _) = s.key();
        let potential = cost + idle * carried;
        let keep = potential < best;
        best = best.min(potential);
        keep
    });
    states
}

/// `idle` for [`pareto`] after runtime `i`: the least L_j(0) of the runtimes after it.
fn idle_after(runtimes: &[RuntimeDemand], i: usize) -> f64 {
    let idle = runtimes[i + 1..].iter().map(|r| (r.latency)(0.0, 1)).fold(f64::INFINITY, f64::min);
    if idle.is_finite() { idle.max(0.0) } else { 0.0 }
}

/// The exact optimum of Eq. 1–7 under `floors`, or `None` if the constraints cannot all hold
/// (Σ ⌊Q_i/M_i⌋ > G, or no runtime).
///
/// First by Lagrangian relaxation of Eq. 2 (see [`relaxed`]): a minimiser of Σ L_i·C_i + μ·Σ N_i
/// that uses exactly G instances is an optimum of Eq. 1–7, whatever the curves, as long as the
/// relaxed problem was solved exactly (which needs each L_i convex as well as non-decreasing, as
/// queueing curves are). When no μ gives exactly G (a duality gap), the exhaustive DP decides.
pub fn allocate(instances: usize, runtimes: &[RuntimeDemand], floors: Floors) -> Option<Allocation> {
    let k = runtimes.len();
    if k == 0 {
        return None;
    }
    let bounds: Vec<usize> = (0..k).map(|i| lower_bound(runtimes, i, floors)).collect();
    let least: usize = bounds.iter().sum();
    if least > instances {
        return None;
    }
    let counts =
        by_relaxation(instances, runtimes, &bounds).or_else(|| exhaustive(instances, runtimes, &bounds))?;
    let cost = objective(instances, runtimes, &counts, floors)?;
    Some(Allocation { instances: counts, cost })
}

/// Bisection on μ for a relaxed optimum with Σ N_i = G.
fn by_relaxation(instances: usize, runtimes: &[RuntimeDemand], bounds: &[usize]) -> Option<Vec<usize>> {
    let used = |counts: &[usize]| counts.iter().sum::<usize>();
    // μ = 0 wants every instance it may have; a large μ only the floors.
    let (mut low, mut high) = (0.0_f64, 1.0_f64);
    let at_low = relaxed(instances, runtimes, bounds, low)?;
    if used(&at_low) <= instances {
        return (used(&at_low) == instances).then_some(at_low);
    }
    while used(&relaxed(instances, runtimes, bounds, high)?) > instances {
        high *= 4.0;
        if !high.is_finite() {
            return None;
        }
    }
    for _ in 0..100 {
        let mu = 0.5 * (low + high);
        let counts = relaxed(instances, runtimes, bounds, mu)?;
        match used(&counts).cmp(&instances) {
            std::cmp::Ordering::Equal => return Some(counts),
            std::cmp::Ordering::Greater => low = mu,
            std::cmp::Ordering::Less => high = mu,
        }
        if high - low <= 1e-12 * high {
            break;
        }
    }
    None
}

/// A state of the relaxed DP: carried demand, cost plus μ per instance so far, and the choices.
#[derive(Debug, Clone)]
struct Relaxed {
    carried: f64,
    cost: f64,
    counts: Vec<usize>,
    used: usize,
}

impl Carrying for Relaxed {
    fn key(&self) -> (f64, f64, usize) {
        (self.carried, self.cost, self.used)
    }
}

/// The relaxed problem: min Σ L_i(B_i)·C_i + μ·Σ N_i under Eq. 3–7 with no total, each N_i at
/// most G less the other runtimes' floors. A DP over runtimes whose state is only the carried
/// demand R (Eq. 4), pruned as in [`pareto`]. From a state, N_i below ⌈(R + Q_i)/M_i⌉ saturates
/// runtime i and carries the rest; at or above it nothing carries, and μ·N_i + (R + Q_i)·L_i((R +
/// Q_i)/N_i) is convex in N_i, so its minimum is found by bisecting its differences.
fn relaxed(instances: usize, runtimes: &[RuntimeDemand], bounds: &[usize], mu: f64) -> Option<Vec<usize>> {
    let k = runtimes.len();
    let least: usize = bounds.iter().sum();
    let mut front = vec![Relaxed { carried: 0.0, cost: 0.0, counts: Vec::with_capacity(k), used: 0 }];
    for (i, r) in runtimes.iter().enumerate() {
        let last = i + 1 == k;
        let most = instances - (least - bounds[i]);
        let mut next = Vec::new();
        for s in &front {
            let offered = s.carried + r.demand;
            let push = |n: usize, next: &mut Vec<Relaxed>| {
                if let Some((carried, term)) = step(r, s.carried, n, last) {
                    let mut counts = s.counts.clone();
                    counts.push(n);
                    next.push(Relaxed {
                        carried,
                        cost: s.cost + term + mu * n as f64,
                        counts,
                        used: s.used + n,
                    });
                }
            };
            // The fewest instances that carry nothing on (all of them for the last runtime).
            let clear =
                if last { bounds[i] } else { ((offered / r.capacity).ceil() as usize).max(bounds[i]) };
            for n in bounds[i]..clear.min(most + 1) {
                push(n, &mut next);
            }
            if clear > most {
                continue;
            }
            let h = |n: usize| step(r, s.carried, n, last).map_or(f64::INFINITY, |(_, t)| t + mu * n as f64);
            // The least n in [clear, most] with h(n + 1) ≥ h(n): the convex minimum.
            let (mut lo, mut hi) = (clear, most);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if h(mid + 1) >= h(mid) { hi = mid } else { lo = mid + 1 }
            }
            push(lo, &mut next);
        }
        front = pareto(next, idle_after(runtimes, i));
    }
    front.into_iter().min_by(|a, b| a.cost.total_cmp(&b.cost)).map(|s| s.counts)
}

/// The exhaustive DP over (instances used, carried demand R), Pareto fronts per count.
fn exhaustive(instances: usize, runtimes: &[RuntimeDemand], bounds: &[usize]) -> Option<Vec<usize>> {
    let k = runtimes.len();
    // suffix[i]: instances the runtimes from i on need at least.
    let mut suffix = vec![0; k + 1];
    for i in (0..k).rev() {
        suffix[i] = suffix[i + 1] + bounds[i];
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
        let idle = idle_after(runtimes, i);
        layers[i + 1] = next.into_iter().map(|front| pareto(front, idle)).collect();
    }
    let best = layers[k][instances].iter().enumerate().min_by(|a, b| a.1.cost.total_cmp(&b.1.cost))?;
    let mut counts = vec![0; k];
    let (mut g, mut at) = (instances, best.0);
    for i in (0..k).rev() {
        let (used, parent_at, n) = layers[i + 1][g][at].parent?;
        counts[i] = n;
        (g, at) = (used, parent_at);
    }
    Some(counts)
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

    /// Latency curves base_i·(1 + a·load + c·load²): growing with the runtime's length (base_i)
    /// and with load, as queueing curves do.
    fn curves(rng: &mut Lcg, k: usize, a: f64, c: f64) -> Vec<Box<dyn Fn(f64, usize) -> f64>> {
        (0..k)
            .map(|i| {
                let base = 1.0 + i as f64 * (0.5 + rng.next());
                Box::new(move |load: f64, _| base * (1.0 + a * load + c * load * load))
                    as Box<dyn Fn(f64, usize) -> f64>
            })
            .collect()
    }

    #[test]
    fn equals_brute_force_on_small_instances() {
        let mut rng = Lcg(7);
        let mut checked = 0;
        for case in 0..400 {
            let k = 1 + case % 4;
            let g = 1 + (case / 4) % 8;
            let curves = curves(&mut rng, k, 0.3, 0.05);
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

    /// Cases too large for brute force: the relaxation, where it certifies, equals the exhaustive
    /// DP; and on smooth queueing curves it certifies (no duality gap) in most cases.
    #[test]
    fn the_relaxation_equals_the_exhaustive_dp_where_it_answers() {
        let mut rng = Lcg(11);
        let mut certified = 0;
        for case in 0..120 {
            let k = 2 + case % 5;
            let g = 20 + (case * 7) % 60;
            let curves = curves(&mut rng, k, 0.2, 0.02);
            let runtimes: Vec<RuntimeDemand> = (0..k)
                .map(|i| RuntimeDemand {
                    demand: rng.next() * 4.0 * g as f64 / k as f64,
                    capacity: 1.0 + rng.next() * 5.0,
                    latency: curves[i].as_ref(),
                })
                .collect();
            let floors = if case % 2 == 0 { Floors::Eq3 } else { Floors::Eq7 };
            let bounds: Vec<usize> = (0..k).map(|i| lower_bound(&runtimes, i, floors)).collect();
            if bounds.iter().sum::<usize>() > g {
                continue;
            }
            let exact = exhaustive(g, &runtimes, &bounds).expect("feasible");
            let exact_cost = objective(g, &runtimes, &exact, floors).unwrap();
            if let Some(fast) = by_relaxation(g, &runtimes, &bounds) {
                let cost = objective(g, &runtimes, &fast, floors).expect("a valid allocation");
                assert!(
                    (cost - exact_cost).abs() <= 1e-9 * exact_cost.max(1.0),
                    "case {case}: {fast:?} vs {exact:?}"
                );
                certified += 1;
            }
        }
        assert!(certified >= 60, "the relaxation certified only {certified} cases");
    }

    #[test]
    fn infeasible_when_the_lower_bounds_exceed_the_cluster() {
        let flat = |_: f64, _: usize| 1.0;
        let r = |demand| RuntimeDemand { demand, capacity: 1.0, latency: &flat };
        assert_eq!(allocate(3, &[r(2.0), r(2.0)], Floors::Eq3), None);
        assert!(allocate(4, &[r(2.0), r(2.0)], Floors::Eq3).is_some());
        assert!(allocate(3, &[r(2.0), r(2.0)], Floors::Eq7).is_some(), "without Eq. 3, overload is priced");
        assert_eq!(allocate(0, &[r(0.0)], Floors::Eq7), None, "Eq. 7: the longest runtime needs an instance");
    }
}
