//! Scenario files: any text gives a scenario whose values were checked, or one clear error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use morph_sim::scenario::Scenario;

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("morph-fuzz-{}.toml", std::process::id()));
    std::fs::write(&path, data).expect("scratch file");
    let tokenize = |text: &str| Ok(text.split_whitespace().count() as u32 + 2);
    if let Ok(scenario) = Scenario::load(&path, &tokenize) {
        assert!(scenario.duration_s.is_finite() && scenario.duration_s > 0.0);
    }
});
