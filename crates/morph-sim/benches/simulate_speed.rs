//! Simulator speed: 1,000,000 requests over 300 instances, then 10,000,000 over 3,000 (goal:
//! each under 10 s on 2 cores). Twitter-like lengths on the GPU table, Poisson for 10 s (100k
//! and 1M req/s), TEI-like policy.
//!
//! `cargo bench -p morph-sim --bench simulate_speed`

use std::time::Instant;

use morph_core::{LatencyProfile, RuntimeSpec, UnitSpec, time::ms_to_nanos};
use morph_policy::{DynamicBatching, DynamicBatchingConfig};
use morph_sim::workload::{Arrivals, Lengths};
use morph_sim::{ProfileCost, SimOptions, Workload, simulate};

/// Simulates `seconds` of Poisson arrivals at `rate` over `instances`; prints one table row.
fn run(profile: &LatencyProfile, rate: f64, seconds: f64, instances: usize) {
    let cost = ProfileCost::new(profile.clone(), 1.0);
    let workload = Workload {
        arrivals: Arrivals::Poisson { rate },
        lengths: Lengths::Twitter { max: 512 },
        outputs: None,
        patience_s: None,
        service: None,
    };
    let started = Instant::now();
    let requests = workload.generate(seconds, 1).expect("workload");
    let generated = started.elapsed();
    let policy = Box::new(DynamicBatching::new(DynamicBatchingConfig {
        max_batch_tokens: 4096,
        max_queue: usize::MAX,
        ..Default::default()
    }));
    let cluster = vec![UnitSpec::encoder(RuntimeSpec::dynamic(512, 8)); instances];
    let sim_start = Instant::now();
    let report = simulate(
        policy,
        &cluster,
        &cost,
        &requests,
        &SimOptions { slo: Some(ms_to_nanos(150.0)), ..SimOptions::default() },
    );
    let simulated = sim_start.elapsed();
    assert_eq!(report.completed, requests.len());
    println!(
        "{:>10} {:>9} {:>11.3} {:>11.3} {:>9.3} {:>11.2} {:>8.3} {:>8.1}%",
        requests.len(),
        instances,
        generated.as_secs_f64(),
        simulated.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        requests.len() as f64 / simulated.as_secs_f64() / 1e6,
        report.mean_latency_ms,
        report.mean_utilisation * 100.0
    );
}

fn main() {
    let table = morph_assets::shared_data().join("profiles/distilbert_trt_gpu_bs1-64_seq1-512.json");
    let profile = LatencyProfile::load(&table).expect("the shared GPU table");
    println!(
        "{:>10} {:>9} {:>11} {:>11} {:>9} {:>11} {:>8} {:>9}",
        "requests", "instances", "generate s", "simulate s", "total s", "M req/s", "mean ms", "util"
    );
    // The first goal, then ten times it (issue 19): both under 10 s in total.
    run(&profile, 100_000.0, 10.0, 300);
    run(&profile, 1_000_000.0, 10.0, 3_000);
}
