//! Arlo Runtime Scheduler solve time (Table 2 analog): the exact allocator at (50 instances,
//! 8 runtimes), (200, 12), (1000, 16), (5000, 32). Paper (Gurobi): 0.156 s, 0.623 s, 2.612 s;
//! goals (issue 19) ≤ 10 ms at (1000, 16) and ≤ 0.1 s at (5000, 32). The exhaustive DP alone
//! took 64 ms at (1000, 16); the Lagrangian relaxation it now tries first takes well under 1 ms.
//!
//! The same with the robust form's curves (issue 50): a runtime's instances as one pooled queue,
//! whose latency depends on how many there are (Allen–Cunneen M/D/c, an Erlang-B recursion over
//! the instances per evaluation).
//!
//! `cargo bench -p morph-policy --bench arlo_allocate`

use std::time::Instant;

use morph_policy::arlo::{Floors, RuntimeDemand, allocate};
use morph_policy::queueing::{DelayModel, Load, delay};

/// How a runtime's latency depends on its load.
#[derive(Clone, Copy)]
enum Curve {
    /// Each instance a queue of its own (the paper's accounting).
    PerInstance,
    /// The runtime's instances one pooled queue (M/D/c).
    Pooled,
}

/// Twitter-like demand over `k` runtimes with max lengths 512·(i+1)/k: most requests are short.
/// Per-instance latency grows with the runtime's length and with load; the cluster runs at ~70%.
fn solve(instances: usize, k: usize, curve: Curve) -> (f64, Vec<usize>) {
    let lens: Vec<f64> = (1..=k).map(|i| 512.0 * i as f64 / k as f64).collect();
    let share: Vec<f64> = lens.iter().map(|l| (-l / 120.0).exp()).collect();
    let total_share: f64 = share.iter().sum();
    let capacity: Vec<f64> = lens.iter().map(|l| 150.0 / (1.0 + l / 64.0)).collect();
    let mean_capacity = capacity.iter().zip(&share).map(|(c, s)| c * s / total_share).sum::<f64>();
    let total = 0.7 * instances as f64 * mean_capacity;
    let curves: Vec<Box<dyn Fn(f64, usize) -> f64>> = lens
        .iter()
        .zip(&capacity)
        .map(|(&l, &m)| {
            let service = 1.0 + l / 64.0;
            match curve {
                Curve::PerInstance => {
                    Box::new(move |b: f64, _| service * (1.0 + b / m)) as Box<dyn Fn(f64, usize) -> f64>
                }
                Curve::Pooled => Box::new(move |b: f64, n: usize| {
                    let mu = 1.0 / service;
                    let rho = (b / m).min(0.95);
                    let replicas = n.max(1) as u32;
                    let load =
                        Load { lambda: rho * mu * f64::from(replicas), mu, replicas, ca: 1.0, cs: 0.0 };
                    delay(DelayModel::AllenCunneen, load) + 100.0 * (b / m - 0.95).max(0.0)
                }),
            }
        })
        .collect();
    let runtimes: Vec<RuntimeDemand> = (0..k)
        .map(|i| RuntimeDemand {
            demand: total * share[i] / total_share,
            capacity: capacity[i],
            latency: curves[i].as_ref(),
        })
        .collect();
    let mut best = f64::MAX;
    let mut result = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        let a = allocate(instances, &runtimes, Floors::Eq3).expect("feasible");
        best = best.min(start.elapsed().as_secs_f64());
        result = a.instances;
    }
    (best, result)
}

fn main() {
    println!(
        "{:>10} {:>9} {:>12} {:>12} {:>12}  allocation (pooled)",
        "instances", "runtimes", "solve (s)", "pooled (s)", "paper (s)"
    );
    for (g, k, paper) in
        [(50, 8, Some(0.156)), (200, 12, Some(0.623)), (1000, 16, Some(2.612)), (5000, 32, None)]
    {
        let (secs, _) = solve(g, k, Curve::PerInstance);
        let (pooled, alloc) = solve(g, k, Curve::Pooled);
        let paper = paper.map_or("-".to_string(), |p: f64| format!("{p:.3}"));
        println!("{g:>10} {k:>9} {secs:>12.4} {pooled:>12.4} {paper:>12}  {alloc:?}");
    }
}
