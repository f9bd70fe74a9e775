//! JSONL request traces: any bytes give finite times and lengths, or an error naming line and
//! column.
#![no_main]

use libfuzzer_sys::fuzz_target;
use morph_sim::workload::Trace;

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("morph-fuzz-{}.jsonl", std::process::id()));
    std::fs::write(&path, data).expect("scratch file");
    let trace = Trace::new(&path);
    if let Ok(times) = trace.times() {
        assert!(times.iter().all(|t| t.is_finite()), "{times:?}");
    }
    let _ = trace.input_lengths();
});
