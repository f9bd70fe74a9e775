//! JSONL request traces (see `shared/trace.rs`).
#![no_main]

#[path = "shared/trace.rs"]
mod trace;

libfuzzer_sys::fuzz_target!(|data: &[u8]| trace::check(data, "jsonl"));
