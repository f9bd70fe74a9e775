//! Latency profiles: any text gives a profile that answers every shape with a finite,
//! non-negative latency, or one clear error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use morph_core::LatencyProfile;
use morph_core::PaddedShape;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(profile) = LatencyProfile::from_json(text) else { return };
    for batch in [1, 3, 64] {
        for len in [1, 100, profile.max_len(), profile.max_len().saturating_add(1)] {
            let ms = profile.latency_ms(PaddedShape { batch, len });
            assert!(ms.is_finite() && ms >= 0.0, "{ms} ms at {batch}x{len}");
        }
    }
});
