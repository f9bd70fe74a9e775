//! OTAS Alg. 2 decision time: the dynamic program over N_B queued batches × N_γ = 8 plans
//! (issue 15's goal: ≤ 1 ms at 100 batches), against Alg. 3's linear rule on the same queue.
//!
//! `cargo bench -p morph-policy --bench otas_plan`

use std::time::Instant;

use morph_core::Time;
use morph_policy::otas::manual;
use morph_policy::otas::plan::{self, BatchCosts};

/// xorshift64*: deterministic queues without an RNG dependency.
fn next(s: &mut u64) -> u64 {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33
}

/// `n` batches in deadline order with 8 plans each: time grows and utility rises with the plan.
fn queue(n: usize) -> Vec<BatchCosts> {
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    let mut deadline = 0u64;
    (0..n)
        .map(|_| {
            deadline += 20_000_000 + next(&mut s) % 40_000_000;
            let rows = 1 + next(&mut s) % 64;
            let by_plan = (0..8u64)
                .map(|l| ((10 + 4 * l) * 1_000_000 + rows * 100_000, rows as f64 * (0.8 + 0.02 * l as f64)))
                .collect();
            BatchCosts { deadline: Time(deadline), mean_utility: 0.3, by_plan }
        })
        .collect()
}

fn best_of(runs: usize, mut f: impl FnMut()) -> f64 {
    (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64() * 1e6
        })
        .fold(f64::MAX, f64::min)
}

fn main() {
    println!("| queued batches | plans | Alg. 2 DP µs (best of 200) | Alg. 3 rule µs | DP / rule |");
    println!("|---:|---:|---:|---:|---:|");
    for n in [10, 50, 100, 200] {
        let q = queue(n);
        let dp = best_of(200, || {
            std::hint::black_box(plan::plan(Time::ZERO, std::hint::black_box(&q), true));
        });
        let rule = best_of(200, || {
            std::hint::black_box(manual::allocate(Time::ZERO, std::hint::black_box(&q), 4, 0.8));
        });
        println!("| {n} | 8 | {dp:.1} | {rule:.2} | {:.0}× |", dp / rule.max(1e-3));
    }
}
