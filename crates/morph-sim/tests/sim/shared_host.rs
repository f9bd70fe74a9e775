//! Several models on one host's cores in the simulator: computations wait in one line for
//! their threads' cores, earliest deadline first by each model's slack; a static split gives
//! each model its own cores; the controller moves first place to the model whose backlog
//! needs it and lets go when it drains.

use morph_core::fixtures::flat_profile;
use morph_core::{Policy, RuntimeSpec, Time, UnitSpec};
use morph_policy::{DynamicBatching, DynamicBatchingConfig};
use morph_sim::{HostedModel, ProfileCost, Sharing, SimOptions, SimRequest, simulate_host};

const MS: u64 = 1_000_000;

fn fifo() -> Box<dyn Policy> {
    Box::new(DynamicBatching::new(DynamicBatchingConfig {
        max_batch_tokens: 1 << 30,
        max_queue: usize::MAX,
        ..Default::default()
    }))
}

/// One-row batches of `ms` whatever their length.
fn flat(ms: f64) -> ProfileCost {
    ProfileCost::new(flat_profile(ms, 1), 1.0)
}

fn at(ms: &[f64]) -> Vec<SimRequest> {
    ms.iter().map(|t| SimRequest::new(Time::from_millis_f64(*t), 10, 0)).collect()
}

fn model<'a>(
    name: &str,
    instances: usize,
    cost: &'a ProfileCost,
    arrivals: &[f64],
    slo_ms: u64,
) -> HostedModel<'a> {
    HostedModel {
        name: name.into(),
        policy: fifo(),
        cluster: vec![UnitSpec::batch(RuntimeSpec::dynamic(512, 1)); instances],
        cost,
        requests: at(arrivals),
        options: SimOptions { per_request: true, ..SimOptions::default() },
        slo: slo_ms * MS,
        core_slo: slo_ms * MS,
    }
}

/// Each model's latencies in ms, in arrival order.
fn latencies(report: &morph_sim::HostReport) -> Vec<Vec<f64>> {
    report
        .models
        .iter()
        .map(|(_, r)| r.answers.iter().map(|a| a.as_ref().expect("answered").latency as f64 / 1e6).collect())
        .collect()
}

#[test]
fn on_one_core_the_model_with_less_slack_goes_first_and_nothing_computes_beside_it() {
    let cost = flat(10.0);
    // Model a (two instances, SLO 1 s: slack 250 ms) takes the core at 0 and asks again at 1 ms;
    // model b (SLO 8 ms: slack 2 ms) asks at 2 ms and goes ahead of a's second batch at 10 ms.
    let models = vec![model("a", 2, &cost, &[0.0, 1.0], 1000), model("b", 1, &cost, &[2.0], 8)];
    let r = simulate_host(models, 1, &Sharing::ByLoad);
    assert_eq!(latencies(&r), vec![vec![10.0, 29.0], vec![18.0]]);
    // The core held 30 ms of batches in all, its last period cut at the last event (30 ms).
    assert_eq!(r.core_seconds.len(), 2);
    assert!((r.core_seconds.iter().sum::<f64>() - 0.03).abs() < 1e-9, "{:?}", r.core_seconds);
    let last = r.periods.last().expect("a period");
    assert!((last.threads.iter().sum::<f64>() - 1.0).abs() < 1e-9, "{last:?}");
}

#[test]
fn a_split_gives_each_model_its_own_cores_and_none_of_the_others() {
    let cost = flat(10.0);
    let build = || vec![model("a", 2, &cost, &[0.0, 1.0], 1000), model("b", 1, &cost, &[2.0], 8)];
    // Split 1+1 of two cores: a's two batches share its one core, b runs at once on its own.
    let split = simulate_host(build(), 2, &Sharing::Split(vec![vec![0], vec![1]]));
    assert_eq!(latencies(&split), vec![vec![10.0, 19.0], vec![10.0]]);
    assert_eq!(split.sharing, "split 0|1");
    // Shared by load, a's two batches take both cores at once and b waits for the first to end.
    let shared = simulate_host(build(), 2, &Sharing::ByLoad);
    assert_eq!(latencies(&shared), vec![vec![10.0, 10.0], vec![18.0]]);
}

#[test]
fn the_splits_of_a_host_give_every_model_a_core_and_pinned_sets_are_equal_or_disjoint() {
    let splits: Vec<String> = Sharing::splits(4, 3).iter().map(Sharing::label).collect();
    assert_eq!(splits, ["split 0|1|2,3", "split 0|1,2|3", "split 0,1|2|3"]);
    assert!(Sharing::splits(2, 3).is_empty());
    assert!(Sharing::Split(vec![vec![0], vec![0], vec![1]]).check(2, 3).is_ok());
    let overlap = Sharing::Split(vec![vec![0, 1], vec![1]]).check(2, 2).unwrap_err();
    assert!(overlap.contains("equal or disjoint"), "{overlap}");
    assert!(Sharing::Split(vec![vec![2], vec![0]]).check(2, 2).is_err());
}

#[test]
fn models_pinned_to_one_core_wait_for_each_other_and_not_for_the_third() {
    let cost = flat(10.0);
    // a and b pinned to core 0, c alone on core 1: b waits for a's batch, c runs at once.
    let models = vec![
        model("a", 1, &cost, &[0.0], 1000),
        model("b", 1, &cost, &[1.0], 1000),
        model("c", 1, &cost, &[2.0], 1000),
    ];
    let r = simulate_host(models, 2, &Sharing::Split(vec![vec![0], vec![0], vec![1]]));
    assert_eq!(latencies(&r), vec![vec![10.0], vec![19.0], vec![10.0]]);
}

#[test]
fn a_flooded_model_becomes_critical_its_cores_rise_and_it_lets_go_once_drained() {
    let cost = flat(10.0);
    // Model a is flooded for its first second (400 requests on two instances, SLO 200 ms);
    // model b gets one request every 50 ms throughout.
    let flood: Vec<f64> = (0..400).map(|i| f64::from(i) * 2.5).collect();
    let steady: Vec<f64> = (0..80).map(|i| f64::from(i) * 50.0).collect();
    let models = vec![model("a", 2, &cost, &flood, 200), model("b", 2, &cost, &steady, 200)];
    let r = simulate_host(models, 2, &Sharing::ByLoad);
    let first = r.moves.first().expect("a move");
    assert_eq!((first.critical.as_deref(), first.reason), (Some("a"), "backlog"));
    let last = r.moves.last().expect("a move");
    assert_eq!((last.critical.as_deref(), last.reason), (None, "drained"), "{:?}", r.moves);
    // While flooded, model a holds more cores than b; at the end, b holds what it needs.
    let early = &r.periods[1].threads;
    assert!(early[0] > early[1], "{early:?}");
    for p in &r.periods {
        assert!(p.threads.iter().sum::<f64>() <= 2.0 + 1e-9, "{p:?}");
    }
    assert!(r.models.iter().all(|(_, m)| m.measured.dropped == 0));
}

mod host_scenarios {
    use std::path::Path;

    use morph_sim::scenario::HostScenario;

    fn words(text: &str) -> Result<u32, String> {
        Ok(text.split_whitespace().count() as u32 + 2)
    }

    /// Writes a host scenario of `models` (name, model scenario) with `extra` keys at its top.
    fn host(dir: &Path, extra: &str, models: &[(&str, &str)]) -> std::path::PathBuf {
        let mut text = format!("name = \"t\"\nduration_s = 10\n{extra}\n");
        for (name, scenario) in models {
            let path = morph_assets::path(&format!("scenarios/hosts/{scenario}"));
            text.push_str(&format!("[[models]]\nname = \"{name}\"\nscenario = \"{}\"\n", path.display()));
        }
        let path = dir.join("host.toml");
        std::fs::write(&path, text).expect("writing the host scenario");
        path
    }

    fn refusal(extra: &str, models: &[(&str, &str)]) -> String {
        let dir = tempfile::tempdir().expect("a temporary folder");
        HostScenario::load(&host(dir.path(), extra, models), &words).expect_err("refused").to_string()
    }

    const EMBED: &str = "models/rag_embedder_cpu.toml";
    const GENERATE: &str = "models/rag_generator_cpu.toml";

    #[test]
    fn the_shipped_host_scenarios_load_and_run_every_sharing_on_the_same_streams() {
        let dir = morph_assets::path("scenarios/hosts");
        let mut ran = 0;
        for entry in std::fs::read_dir(&dir).expect("scenarios/hosts") {
            let path = entry.expect("an entry").path();
            if path.extension().is_none_or(|e| e != "toml") {
                continue;
            }
            let mut host =
                HostScenario::load(&path, &words).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            host.duration_s = 30.0;
            host.seeds = vec![1];
            let rows = host.run(&mut |_, _| {}).expect("the host runs");
            assert_eq!(rows.len(), host.sharings().len());
            assert_eq!(rows[0].sharing, "cores by load");
            // Every way of sharing served the identical streams.
            for row in &rows[1..] {
                let counts = |r: &morph_sim::scenario::HostRow| -> Vec<usize> {
                    r.models.iter().map(|m| m.measured.requests).collect()
                };
                assert_eq!(counts(row), counts(&rows[0]), "{}", row.sharing);
            }
            ran += 1;
        }
        assert!(ran >= 1, "no host scenario in {}", dir.display());
        // Each model's scenario runs on its own too.
        for entry in std::fs::read_dir(dir.join("models")).expect("scenarios/hosts/models") {
            let path = entry.expect("an entry").path();
            morph_sim::Scenario::load(&path, &words).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
    }

    #[test]
    fn a_host_scenario_refuses_what_it_cannot_run_naming_the_model_and_key() {
        assert!(
            refusal("cores = 2", &[("a", EMBED), ("a", GENERATE)])
                .contains("models 'a': two models have this name")
        );
        assert!(refusal("cores = 0", &[("a", EMBED)]).contains("cores: must be at least 1"));
        let three = [("e", EMBED), ("r", "models/rag_reranker_cpu.toml"), ("g", GENERATE)];
        assert!(refusal("cores = 2", &three).contains("list the splits to compare"));
        assert!(refusal("cores = 2\nsplits = [[[0], [1]]]", &three).contains("names cores for 2 models"));
        assert!(refusal("cores = 2\nsplits = [[[0, 1], [1], [0]]]", &three).contains("equal or disjoint"));
        assert!(refusal("cores = 2", &[("x", "missing.toml")]).contains("models 'x': scenario"));
        assert!(refusal("cores = 2\nthreads = 4", &[("a", EMBED)]).contains("unknown field `threads`"));
    }
}

#[test]
fn with_a_deadline_requests_that_cannot_start_in_time_are_given_up_and_the_others_served() {
    let cost = flat(10.0);
    // One core, 10 ms batches of one row, arrivals at 0–3 ms, a 25 ms deadline: request 0 runs
    // at once, request 1 when it ends (its batch ends at 20 ms, 19 ms after it came); then
    // requests 2 and 3 (due at 27 and 28 ms) are given up, since a batch would end at 30 ms.
    let mut hosted = model("a", 1, &cost, &[0.0, 1.0, 2.0, 3.0], 15);
    hosted.policy = Box::new(morph_policy::give_up::GiveUpLate::new(fifo(), 25 * MS));
    let r = simulate_host(vec![hosted], 1, &Sharing::ByLoad);
    let outcomes: Vec<(String, f64)> = r.models[0]
        .1
        .answers
        .iter()
        .map(|a| a.as_ref().expect("answered"))
        .map(|a| (format!("{:?}", a.outcome), a.latency as f64 / 1e6))
        .collect();
    let given_up = format!(
        "{:?}",
        morph_core::Outcome::Dropped(morph_core::DropReason::DeadlineUnreachable { within: 25 * MS })
    );
    assert_eq!(
        outcomes,
        vec![("Done".into(), 10.0), ("Done".into(), 19.0), (given_up.clone(), 18.0), (given_up, 17.0)]
    );
}
