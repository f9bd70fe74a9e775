//! The simulator against textbook queueing results.

use morph_core::{Point, Policy, Profile, RuntimeSpec, UnitSpec, time::ms_to_nanos};
use morph_policy::{DynamicBatching, DynamicBatchingConfig};
use morph_sim::workload::{Arrivals, Lengths};
use morph_sim::{ProfileCost, SimOptions, Workload, simulate};

fn fifo() -> Box<dyn Policy> {
    Box::new(DynamicBatching::new(DynamicBatchingConfig {
        max_batch_tokens: u64::MAX,
        max_queue: usize::MAX,
        ..Default::default()
    }))
}

/// M/D/1 at ρ = 0.5: Poisson arrivals at λ = 50/s, deterministic service D = 10 ms, one server,
/// one request per batch. Mean wait W_q = ρ·D / (2(1 − ρ)) = 5 ms (Pollaczek–Khinchine).
#[test]
fn md1_mean_wait_matches_pollaczek_khinchine() {
    let d_ms = 10.0;
    let cost = ProfileCost::new(
        Profile::from_points(
            "D",
            [Point { batch: 1, len: 1, ms: d_ms }, Point { batch: 1, len: 512, ms: d_ms }],
        )
        .unwrap(),
        1.0,
    );
    let workload = Workload {
        arrivals: Arrivals::Poisson { rate: 50.0 },
        lengths: Lengths::Fixed { len: 16 },
        outputs: None,
        patience_s: None,
        service: None,
    };
    let requests = workload.generate(8_000.0, 42).unwrap();
    assert!(requests.len() > 390_000);
    let report = simulate(
        fifo(),
        &[UnitSpec::encoder(RuntimeSpec::dynamic(512, 1))],
        &cost,
        &requests,
        &SimOptions { slo: Some(ms_to_nanos(1e9)), ..SimOptions::default() },
    );
    assert_eq!(report.completed, requests.len());
    let rho = 50.0 * d_ms / 1e3;
    let want_wait = rho * d_ms / (2.0 * (1.0 - rho));
    let wait = report.mean_latency_ms - d_ms;
    assert!((wait / want_wait - 1.0).abs() < 0.02, "mean wait {wait:.4} ms, M/D/1 says {want_wait} ms");
    assert!((report.mean_utilisation - rho).abs() < 0.01, "utilisation {}", report.mean_utilisation);
}

/// M/D/c sanity: with c = 4 identical servers at the same per-server load, waiting is shorter
/// than M/D/1's (pooling), and utilisation is still ρ.
#[test]
fn pooled_servers_wait_less_at_the_same_load() {
    let cost = ProfileCost::new(
        Profile::from_points(
            "D",
            [Point { batch: 1, len: 1, ms: 10.0 }, Point { batch: 1, len: 512, ms: 10.0 }],
        )
        .unwrap(),
        1.0,
    );
    let workload = Workload {
        arrivals: Arrivals::Poisson { rate: 200.0 },
        lengths: Lengths::Fixed { len: 16 },
        outputs: None,
        patience_s: None,
        service: None,
    };
    let requests = workload.generate(1_000.0, 3).unwrap();
    let report = simulate(
        fifo(),
        &[UnitSpec::encoder(RuntimeSpec::dynamic(512, 1)); 4],
        &cost,
        &requests,
        &SimOptions::default(),
    );
    let wait = report.mean_latency_ms - 10.0;
    assert!(wait > 0.0 && wait < 5.0 * 0.6, "M/D/4 wait {wait} ms should be well under M/D/1's 5 ms");
    assert!((report.mean_utilisation - 0.5).abs() < 0.01);
}
