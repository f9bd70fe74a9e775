//! Simulator speed: 1,000,000 requests over 300 instances (goal: under 10 s on 2 cores).
//! Twitter-like lengths on the GPU table, Poisson at 100k req/s for 10 s, TEI-like policy.
//!
//! `cargo bench -p morph-sim --bench simulate_speed`

use std::path::PathBuf;
use std::time::Instant;

use morph_core::{Profile, RuntimeSpec, UnitSpec, time::ms_to_nanos};
use morph_policy::{DynamicBatching, DynamicBatchingConfig};
use morph_sim::workload::{Arrivals, Lengths};
use morph_sim::{ProfileCost, SimOptions, Workload, simulate};

fn main() {
    let table = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/profiles/distilbert_trt_gpu_bs1-64_seq1-512.json");
    let profile = Profile::load(&table).expect("the shared GPU table");
    let cost = ProfileCost::new(profile, 1.0);
    let workload = Workload {
        arrivals: Arrivals::Poisson { rate: 100_000.0 },
        lengths: Lengths::Twitter { max: 512 },
        outputs: None,
        patience_s: None,
    };
    let started = Instant::now();
    let requests = workload.generate(10.0, 1).expect("workload");
    let generated = started.elapsed();
    let policy = Box::new(DynamicBatching::new(DynamicBatchingConfig {
        max_batch_tokens: 4096,
        max_queue: usize::MAX,
        ..Default::default()
    }));
    let cluster = vec![UnitSpec::encoder(RuntimeSpec::dynamic(512, 8)); 300];
    let sim_start = Instant::now();
    let report = simulate(
        policy,
        &cluster,
        &cost,
        &requests,
        &SimOptions { slo: Some(ms_to_nanos(150.0)), ..SimOptions::default() },
    );
    let simulated = sim_start.elapsed();
    println!("requests {}  instances {}  completed {}", requests.len(), cluster.len(), report.completed);
    println!(
        "generate {:.3} s  simulate {:.3} s  total {:.3} s  ({:.2} M requests/s simulated)",
        generated.as_secs_f64(),
        simulated.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        requests.len() as f64 / simulated.as_secs_f64() / 1e6
    );
    println!(
        "mean {:.3} ms  p99 {:.3} ms  utilisation {:.1}%  (goal: total under 10 s)",
        report.mean_latency_ms,
        report.p99_latency_ms,
        report.mean_utilisation * 100.0
    );
}
