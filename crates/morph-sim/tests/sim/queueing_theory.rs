//! The simulator against textbook queueing results.

use morph_core::fixtures::flat_profile;
use morph_core::{Policy, RuntimeSpec, UnitSpec, time::ms_to_nanos};
use morph_policy::registry::{Context, build};
use morph_policy::{DynamicBatching, DynamicBatchingConfig};
use morph_sim::cost::{LinearGeneration, Prefill};
use morph_sim::workload::{Arrivals, Lengths, Predictor};
use morph_sim::{ProfileCost, SimOptions, Workload, simulate};
use serde_json::json;

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
    let cost = ProfileCost::new(flat_profile(d_ms, 1), 1.0);
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
        &[UnitSpec::batch(RuntimeSpec::dynamic(512, 1))],
        &cost,
        requests.iter().copied(),
        &SimOptions { slo: Some(ms_to_nanos(1e9)), ..SimOptions::default() },
    );
    assert_eq!(report.measured.completed, requests.len());
    let rho = 50.0 * d_ms / 1e3;
    let want_wait = rho * d_ms / (2.0 * (1.0 - rho));
    let wait = report.measured.mean_latency_ms - d_ms;
    assert!((wait / want_wait - 1.0).abs() < 0.02, "mean wait {wait:.4} ms, M/D/1 says {want_wait} ms");
    assert!((report.mean_utilisation - rho).abs() < 0.01, "utilisation {}", report.mean_utilisation);
}

/// M/D/c sanity: with c = 4 identical servers at the same per-server load, waiting is shorter
/// than M/D/1's (pooling), and utilisation is still ρ.
#[test]
fn pooled_servers_wait_less_at_the_same_load() {
    let cost = ProfileCost::new(flat_profile(10.0, 1), 1.0);
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
        &[UnitSpec::batch(RuntimeSpec::dynamic(512, 1)); 4],
        &cost,
        requests,
        &SimOptions::default(),
    );
    let wait = report.measured.mean_latency_ms - 10.0;
    assert!(wait > 0.0 && wait < 5.0 * 0.6, "M/D/4 wait {wait} ms should be well under M/D/1's 5 ms");
    assert!((report.mean_utilisation - 0.5).abs() < 0.01);
}

/// SSJF without batching is a non-preemptive priority queue: oracle shortest-first on two job
/// sizes against Cobham's M/G/1 result, FCFS against Pollaczek–Khinchine, on one Poisson stream.
/// λ = 14/s, half the jobs 10 tokens and half 100 at K = 1 ms per token and no prefill: service
/// 10 or 100 ms, ρ₁ = 0.07, ρ = 0.77, W₀ = Σλᵢ·E[Sᵢ²]/2 = 35.35 ms.
/// - FCFS: W = W₀/(1 − ρ) = 153.7 ms.
/// - SJF: the short class waits W₀/(1 − ρ₁) = 38.0 ms, the long W₀/((1 − ρ₁)(1 − ρ)) = 165.3 ms.
///
/// So an order can only shorten what the short jobs wait: it leaves the long jobs' wait as it was
/// or longer, the bound that caps SSJF's gain when most answers are of one length.
#[test]
fn shortest_first_without_batching_matches_cobhams_priority_queue() {
    let cost = LinearGeneration::new(Prefill::Constant(0.0), vec![(1, 1.0)]).unwrap();
    let workload = Workload {
        arrivals: Arrivals::Poisson { rate: 14.0 },
        lengths: Lengths::Fixed { len: 16 },
        outputs: Some(Lengths::Empirical { values: vec![10, 100] }),
        patience_s: None,
        service: None,
    };
    let requests = Predictor::Oracle.tell(&workload.generate(20_000.0, 7).unwrap(), 4096);
    let shares: f64 = requests.iter().filter(|r| r.output_len == 10).count() as f64 / requests.len() as f64;
    assert!((shares - 0.5).abs() < 0.01, "short share {shares}");
    let mean_jct = |policy: &str| {
        let params = json!({ "batching": {"mode": "none"}, "aging": null, "max_queue": 1_000_000 });
        let costs = Context { generation: Some(cost.costs()), ..Context::default() };
        let policy = build(policy, &params, &costs).unwrap();
        let decoder = [UnitSpec::generation(RuntimeSpec::dynamic(512, 1))];
        let report = simulate(policy, &decoder, &cost, requests.iter().copied(), &SimOptions::default());
        assert_eq!(report.measured.completed, requests.len());
        report.measured.mean_latency_ms
    };
    let (lambda, s) = (14.0 / 1e3, [10.0, 100.0]);
    let rho: [f64; 2] = s.map(|si| lambda / 2.0 * si);
    let w0: f64 = s.iter().map(|si| lambda / 2.0 * si * si / 2.0).sum();
    let mean_service = (s[0] + s[1]) / 2.0;
    let want_fcfs = w0 / (1.0 - rho[0] - rho[1]) + mean_service;
    let want_sjf =
        (w0 / (1.0 - rho[0]) + w0 / ((1.0 - rho[0]) * (1.0 - rho[0] - rho[1]))) / 2.0 + mean_service;
    let (fcfs, sjf) = (mean_jct("fcfs"), mean_jct("ssjf"));
    for (got, want, what) in [(fcfs, want_fcfs, "FCFS"), (sjf, want_sjf, "SJF")] {
        assert!((got / want - 1.0).abs() < 0.05, "{what}: mean JCT {got:.2} ms, theory says {want:.2} ms");
    }
}
