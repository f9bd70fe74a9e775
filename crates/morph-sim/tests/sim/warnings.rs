//! A simulation that loses work says so: recorded lengths longer than every runtime are a
//! scenario warning before the run, a run that drops most of its requests warns with the
//! counts by reason, and a trace that ends before the duration is named.

use std::path::Path;

use morph_sim::scenario::Scenario;

/// A trace of 200 requests 10 ms apart, three in four longer than the 128-token runtime.
fn scenario(dir: &Path, extra: &str) -> Scenario {
    let rows: String = (0..200)
        .map(|i| {
            format!(
                "{{\"timestamp\": {}, \"input_length\": {}}}\n",
                i * 10,
                if i % 4 == 0 { 64 } else { 300 }
            )
        })
        .collect();
    std::fs::write(dir.join("trace.jsonl"), rows).expect("the trace is written");
    let profile = morph_assets::path("profiles/minilm_candle_cpu_2core.json");
    let text = format!(
        r#"
name = "drops"
duration_s = 1.5
seeds = [1]
{extra}
[workload]
arrivals = {{ kind = "trace", path = "trace.jsonl" }}
lengths = {{ kind = "trace", path = "trace.jsonl" }}
[cluster]
profile = "{}"
runtimes = [{{ runtime = "dynamic:128x8", instances = 1 }}]
[[policies]]
name = "dynamic-batching"
"#,
        profile.display()
    );
    let path = dir.join("drops.toml");
    std::fs::write(&path, text).expect("the scenario is written");
    Scenario::load(&path, &|_| Err("no corpus".into())).expect("the scenario loads")
}

#[test]
fn a_run_that_drops_most_of_its_requests_warns_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let s = scenario(dir.path(), "");
    let warnings = s.warnings().unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("150 of 200 recorded lengths (75%) exceed the longest runtime (128 tokens)")),
        "{warnings:?}"
    );
    let rows = s.run(&mut |_, _| {}).unwrap();
    let report = &rows[0].report;
    assert_eq!(report.measured.dropped_by.get("too long for every runtime"), Some(&report.measured.dropped));
    let warning = rows[0].drop_warning().expect("a warning");
    assert!(
        warning.contains("were not served") && warning.contains("too long for every runtime"),
        "{warning}"
    );
}

#[test]
fn a_trace_that_ends_before_the_duration_is_named_and_a_loop_fills_it() {
    let dir = tempfile::tempdir().unwrap();
    // The trace spans 1.99 s; the run asks for 5.
    let mut s = scenario(dir.path(), "");
    s.duration_s = 5.0;
    let warnings = s.warnings().unwrap();
    assert!(
        warnings.iter().any(|w| w.contains("the trace ends after 2 s of the 5 s duration")),
        "{warnings:?}"
    );
    let requests = s.run(&mut |_, _| {}).unwrap()[0].report.measured.requests;
    assert_eq!(requests, 200, "a trace that does not loop ends");
    if let morph_sim::workload::Arrivals::Trace { repeat, .. } = &mut s.workload.arrivals {
        *repeat = true;
    }
    assert!(s.warnings().unwrap().iter().all(|w| !w.contains("trace ends")));
    assert_eq!(
        s.run(&mut |_, _| {}).unwrap()[0].report.measured.requests,
        500,
        "tiled: 2 s a copy, 5 s of it"
    );
}
