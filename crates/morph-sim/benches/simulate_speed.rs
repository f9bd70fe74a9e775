//! Simulator speed and memory: Twitter-like lengths on the GPU table, Poisson for 10 s, the
//! TEI-like policy, drawn as the run goes. 1,000,000 requests over 300 instances, 10,000,000 over
//! 3,000 and (with `--full`) 100,000,000 over 30,000 (issue 50's goal: under 60 s and 4 GiB).
//! Each size runs as one pool under one policy and as fifteen separate servers behind a round-robin
//! balancer (`morph_sim::partitions`, a thread each). The peak resident memory is the process's
//! (`VmHWM`), so each run is a process of its own:
//!
//! `cargo bench -p morph-sim --bench simulate_speed [-- --full | --size INSTANCES [--partitions P] [--seconds S]]`

use std::time::Instant;

use morph_core::{LatencyProfile, RuntimeSpec, UnitSpec, time::ms_to_nanos};
use morph_policy::{DynamicBatching, DynamicBatchingConfig};
use morph_sim::workload::{Arrivals, Lengths};
use morph_sim::{Partition, ProfileCost, SimOptions, Workload, simulate_partitioned};

/// Servers the instances are split into, besides one pool.
const SERVERS: usize = 15;

/// Simulates `seconds` of Poisson arrivals at `rate` over `instances` in `partitions` equal
/// servers; prints one table row.
fn run(profile: &LatencyProfile, rate: f64, seconds: f64, instances: usize, partitions: usize) {
    let cost = ProfileCost::new(profile.clone(), 1.0);
    let workload = Workload {
        arrivals: Arrivals::Poisson { rate },
        lengths: Lengths::Twitter { max: 512 },
        outputs: None,
        patience_s: None,
        service: None,
    };
    let options = SimOptions { slo: Some(ms_to_nanos(150.0)), ..SimOptions::default() };
    let partition = || Partition {
        policy: Box::new(DynamicBatching::new(DynamicBatchingConfig {
            max_batch_tokens: 4096,
            max_queue: usize::MAX,
            ..Default::default()
        })),
        cluster: vec![UnitSpec::batch(RuntimeSpec::dynamic(512, 8)); instances / partitions],
        options: options.clone(),
    };
    let started = Instant::now();
    let stream = workload.stream(seconds, 1, 1.0).expect("workload");
    // Drawn and dealt on a thread of its own, as `morph simulate` runs a scenario's stream.
    let report = simulate_partitioned((0..partitions).map(|_| partition()).collect(), &cost, stream);
    let took = started.elapsed().as_secs_f64();
    let r = &report.measured;
    assert_eq!(r.completed, r.requests, "every request served");
    println!(
        "{:>11} {:>9} {:>7} {:>9.2} {:>8.2} {:>9.3} {:>9.3} {:>8.1}% {:>9.0}",
        r.requests,
        instances,
        partitions,
        took,
        r.requests as f64 / took / 1e6,
        r.mean_latency_ms,
        r.p99_latency_ms,
        report.mean_utilisation * 100.0,
        peak_rss_mib(),
    );
}

/// This process's peak resident memory in MiB (Linux `VmHWM`); NaN elsewhere.
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = status.lines().find_map(|l| l.strip_prefix("VmHWM:")).and_then(|v| v.split_whitespace().next());
    kib.and_then(|k| k.parse::<f64>().ok()).map_or(f64::NAN, |k| k / 1024.0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let table = morph_assets::shared_data().join("profiles/distilbert_trt_gpu_bs1-64_seq1-512.json");
    let profile = LatencyProfile::load(&table).expect("the shared GPU table");
    // A size given as `--size N` runs alone (the peak memory is this process's), for 10 s of
    // arrivals or `--seconds S`.
    if let Some(k) = args.iter().position(|a| a == "--size") {
        let instances: usize = args[k + 1].parse().expect("--size INSTANCES");
        let seconds = args
            .iter()
            .position(|a| a == "--seconds")
            .map_or(10.0, |s| args[s + 1].parse().expect("--seconds S"));
        let partitions = args
            .iter()
            .position(|a| a == "--partitions")
            .map_or(1, |p| args[p + 1].parse().expect("--partitions P"));
        run(&profile, instances as f64 * 1_000_000.0 / 3_000.0, seconds, instances, partitions);
        return;
    }
    println!(
        "{:>11} {:>9} {:>7} {:>9} {:>8} {:>9} {:>9} {:>9} {:>9}",
        "requests", "instances", "servers", "wall s", "M req/s", "mean ms", "p99 ms", "util", "peak MiB"
    );
    let sizes: &[usize] =
        if args.iter().any(|a| a == "--full") { &[300, 3_000, 30_000] } else { &[300, 3_000] };
    let me = std::env::current_exe().expect("this benchmark's path");
    for instances in sizes {
        for partitions in [1, SERVERS] {
            let out = std::process::Command::new(&me)
                .args(["--size", &instances.to_string(), "--partitions", &partitions.to_string()])
                .output()
                .expect("the benchmark runs itself");
            print!("{}", String::from_utf8_lossy(&out.stdout));
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        }
    }
}
