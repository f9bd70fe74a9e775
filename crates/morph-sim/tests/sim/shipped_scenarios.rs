//! Every scenario in `assets/scenarios/` loads (its values pass the checks, its traces and recorded
//! predictions read without a bad row) and its workload generates. Reads `../shared` traces.

use morph_sim::Scenario;

#[test]
fn every_shipped_scenario_loads_and_generates_its_workload() {
    let dir = morph_assets::path("scenarios");
    let words = |text: &str| Ok(text.split_whitespace().count() as u32 + 2);
    let mut loaded = 0;
    for entry in std::fs::read_dir(&dir).expect("scenarios/") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let scenario = Scenario::load(&path, &words).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let seconds = scenario.duration_s.min(5.0);
        let requests = scenario.workload.generate(seconds, scenario.seeds[0]);
        assert!(requests.is_ok(), "{}: {:?}", path.display(), requests.err());
        loaded += 1;
    }
    assert!(loaded >= 20, "only {loaded} scenarios found");
}
