//! Request bodies as the API validates them: any bytes give a JSON object or a clear error,
//! and every field check on an object gives a value within its bounds or a clear error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use morph_server::api::validate;

fuzz_target!(|data: &[u8]| {
    let Ok(body) = validate::object(data) else { return };
    for field in ["input", "inputs", "prompt"] {
        if let Ok(texts) = validate::texts(&body, field, 64) {
            assert!(!texts.is_empty() && texts.len() <= 64 && texts.iter().all(|t| !t.is_empty()));
        }
    }
    let _ = validate::bool_or(&body, "truncate", false);
    let _ = validate::optional_string(&body, "model");
    if let Ok(t) = validate::number_in(&body, "temperature", 1.0, 0.0, 2.0) {
        assert!((0.0..=2.0).contains(&t));
    }
    if let Ok(Some(p)) = validate::optional_number_in(&body, "top_p", 0.0, 1.0) {
        assert!((0.0..=1.0).contains(&p));
    }
});
