//! Same scenario and seed → byte-identical JSON; another seed → another stream.

use morph_sim::Scenario;

fn shipped(name: &str) -> Scenario {
    let path = morph_assets::path("scenarios").join(name);
    let mut s =
        Scenario::load(&path, &|t| Ok(t.split_whitespace().count() as u32 + 2)).expect("shipped scenario");
    s.duration_s = 5.0;
    s
}

fn json(s: &Scenario) -> String {
    serde_json::to_string(&s.run(&mut |_, _| {}).expect("run")).expect("json")
}

#[test]
fn same_seed_identical_json_other_seed_different() {
    for name in [
        "twitter_stable_gpu.toml",
        "twitter_bursty_gpu.toml",
        "azure_arrivals_cpu.toml",
        "otas_synthetic_cpu.toml",
    ] {
        let mut s = shipped(name);
        s.seeds = vec![7];
        let first = json(&s);
        assert_eq!(first, json(&s), "{name}: same seed must give identical JSON");
        // (Trace arrivals do not depend on the seed; their lengths here do.)
        s.seeds = vec![8];
        assert_ne!(first, json(&s), "{name}: another seed must give another stream");
        for key in [
            "\"requests\"",
            "\"completed\"",
            "\"mean_latency_ms\"",
            "\"p50_latency_ms\"",
            "\"p98_latency_ms\"",
            "\"p99_latency_ms\"",
            "\"slo_attainment\"",
            "\"throughput_rps\"",
            "\"goodput_rps\"",
        ] {
            assert!(first.contains(key), "{name}: JSON lacks {key}");
        }
    }
}

/// A rate sweep over a trace compresses the trace's time and keeps the run's duration in
/// simulated seconds: twice the rate replays in 30 s exactly the rows half the rate replays in
/// 60 s, at half their times, and the run's span stays 30 s (it used to scale with the rate).
#[test]
fn a_rate_sweep_over_a_trace_keeps_the_duration_in_simulated_time() {
    let mut s = shipped("azure_arrivals_cpu.toml");
    s.duration_s = 30.0;
    s.sweep = Some(morph_sim::scenario::Sweep {
        param: morph_sim::scenario::SweepParam::Rate,
        values: vec![20.0, 40.0],
    });
    let rows = s.run(&mut |_, _| {}).expect("run");
    assert_eq!(rows.len(), 2);
    let point = |rate| Some((morph_sim::scenario::SweepParam::Rate, rate));
    let slow = s.workload_at(point(20.0)).unwrap().generate(60.0, 1).unwrap();
    let fast = s.workload_at(point(40.0)).unwrap().generate(30.0, 1).unwrap();
    assert_eq!(fast.len(), slow.len());
    assert_eq!(fast.len(), rows[1].report.measured.requests);
    for (f, s) in fast.iter().zip(&slow) {
        assert!(
            (f.arrival.0 as f64 * 2.0 - s.arrival.0 as f64).abs() < 1e3,
            "{} vs {}",
            f.arrival.0,
            s.arrival.0
        );
    }
    for row in &rows {
        assert!(
            row.report.duration_s < 40.0,
            "the run lasts its 30 simulated seconds: {}",
            row.report.duration_s
        );
    }
    assert!(s.warnings().expect("warnings").is_empty(), "the trace outlasts 30 s at both rates");
}

/// A rate sweep over bursty (MMPP) arrivals uses common random numbers: each higher load's
/// stream carries every request of the lower one, at the same time with the same length, from
/// the same burst states, so a higher load never carries fewer requests.
#[test]
fn a_rate_sweep_over_mmpp_arrivals_is_nested() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested.toml");
    let profile = morph_assets::path("profiles/minilm_candle_cpu_2core.json");
    let text = format!(
        "name = \"nested\"\nduration_s = 600\nseeds = [3]\n[workload]\narrivals = {{ kind = \"mmpp\", rates = [20, 180], dwell_s = 2 }}\nlengths = {{ kind = \"twitter\", max = 512 }}\n[cluster]\nprofile = \"{}\"\nruntimes = [{{ runtime = \"dynamic:512x8\", instances = 2 }}]\n[[policies]]\nname = \"dynamic-batching\"\n[sweep]\nparam = \"rate\"\nvalues = [80, 50, 90, 95]\n",
        profile.display()
    );
    std::fs::write(&path, text).unwrap();
    let s = Scenario::load(&path, &|_| Ok(1)).expect("scenario");
    let point = |rate| Some((morph_sim::scenario::SweepParam::Rate, rate));
    let stream = |rate| s.stream(point(rate), 3).unwrap().collect::<Vec<morph_sim::SimRequest>>();
    let rates = [50.0, 80.0, 90.0, 95.0];
    let streams: Vec<_> = rates.iter().map(|&r| stream(r)).collect();
    for (k, pair) in streams.windows(2).enumerate() {
        let (lower, higher) = (&pair[0], &pair[1]);
        assert!(lower.len() < higher.len(), "{} then {}", lower.len(), higher.len());
        let mut at = 0;
        for r in lower {
            at += higher[at..].iter().position(|h| h == r).unwrap_or_else(|| {
                panic!(
                    "a request at {} of rate {} is missing at rate {}",
                    r.arrival.0,
                    rates[k],
                    rates[k + 1]
                )
            });
        }
    }
    // The mean rate is the sweep's (the states' mean, scaled), within Poisson noise.
    let mean = streams[3].len() as f64 / 600.0;
    assert!((mean / 95.0 - 1.0).abs() < 0.15, "{mean}");
    let rows = s.run(&mut |_, _| {}).expect("run");
    let carried: Vec<usize> = rows.iter().map(|r| r.report.measured.requests).collect();
    assert_eq!(carried, vec![streams[1].len(), streams[0].len(), streams[2].len(), streams[3].len()]);
}

/// A cluster split into partitions (separate servers, each on a thread of its own) gives the
/// same JSON every run, whatever the threads' timing, serves the same stream as the whole
/// cluster does, and refuses a split that is not even, naming the key.
#[test]
fn partitions_are_deterministic_and_serve_the_same_stream() {
    let mut s = shipped("twitter_stable_gpu.toml");
    let whole = s.run(&mut |_, _| {}).expect("run");
    s.cluster.partitions = 5;
    let first = json(&s);
    assert_eq!(first, json(&s), "same seed, same partitions: identical JSON");
    let parts = s.run(&mut |_, _| {}).expect("run");
    assert_eq!(parts[0].report.measured.requests, whole[0].report.measured.requests);
    assert_eq!(parts[0].report.arrival_cv, whole[0].report.arrival_cv, "the whole stream's gaps");
    assert_eq!(parts[0].report.utilisation.len(), 10);
    assert_eq!(parts[0].report.policy_state["partitions"].as_array().map(Vec::len), Some(5));
    s.cluster.partitions = 4;
    let error = s.run(&mut |_, _| {}).expect_err("10 instances in 4 partitions").to_string();
    assert!(
        error.contains("cluster.runtimes[0]: 10 instances do not split into cluster.partitions = 4"),
        "{error}"
    );
}
