//! What the trace targets check: any bytes, read as a trace file with extension `ext`, give
//! finite times and lengths, or an error naming line and column.

use morph_sim::workload::Trace;

pub fn check(data: &[u8], ext: &str) {
    let path = std::env::temp_dir().join(format!("morph-fuzz-{}.{ext}", std::process::id()));
    std::fs::write(&path, data).expect("scratch file");
    let trace = Trace::new(&path);
    if let Ok(times) = trace.times() {
        assert!(times.iter().all(|t| t.is_finite()), "{times:?}");
    }
    let _ = trace.input_lengths();
}
