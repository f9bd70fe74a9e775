//! The emulated engine charges a real profile's latency, and the profile reader loads the GPU
//! table in shared/data.

use std::sync::Arc;

use morph_core::{LatencyProfile, PaddedShape, RuntimeSpec, TokenPlan};
use morph_engine::timing::{synthetic_batch, time_batch};
use morph_engine::{BatchInput, EmulatedRuntime};

fn gpu_table() -> LatencyProfile {
    let path = morph_assets::shared_data().join("profiles/distilbert_trt_gpu_bs1-64_seq1-512.json");
    LatencyProfile::load(&path).unwrap_or_else(|e| panic!("the shared GPU table is needed here: {e}"))
}

#[test]
fn reads_the_gpu_table() {
    let p = gpu_table();
    assert_eq!(p.batches().next(), Some(1));
    assert_eq!(p.max_len(), 509);
    assert_eq!(p.skipped, 1, "the table has one entry with an empty length key");
    // The staircase the Arlo paper relies on (shared/data/README.md): batch 1.
    for (len, ms) in [(61, 1.1), (125, 1.7), (253, 2.1), (509, 3.6)] {
        let got = p.latency_ms(PaddedShape { len, batch: 1 });
        assert!((got - ms).abs() < 0.1, "len {len}: {got} ms, table says about {ms}");
    }
    assert!(
        p.latency_ms(PaddedShape { len: 509, batch: 64 }) > p.latency_ms(PaddedShape { len: 509, batch: 8 })
    );
}

/// The emulated engine charges a batch exactly the profile's latency for its padded shape, and a
/// run never returns before that time has passed (how close it stays above is the benchmark's
/// business: a busy CI machine may overshoot at random, so no upper bound is asserted here).
#[test]
fn emulated_batches_take_the_profiles_latency() {
    let profile = Arc::new(gpu_table());
    for (len, batch) in [(17u32, 1u32), (125, 1), (509, 1), (61, 8), (253, 16), (509, 64)] {
        let mut engine = EmulatedRuntime::new(
            profile.clone(),
            morph_core::UnitSpec::batch(RuntimeSpec::fixed(len, batch)),
            8,
        );
        let want = profile.latency(PaddedShape { len, batch });
        assert_eq!(
            engine.batch_time(len, 1).as_nanos() as u64,
            want,
            "b{batch} l{len}: a fixed runtime pads"
        );
        let got =
            time_batch(&mut engine, BatchInput::Tokens(&synthetic_batch(len, 1)), TokenPlan::Plain, 0, 3)
                .unwrap();
        assert!(got * 1e6 >= want as f64, "b{batch} l{len}: {got:.3} ms is shorter than the profile's");
    }
}
