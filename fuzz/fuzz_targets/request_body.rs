//! Request bodies as the API reads them: any bytes give each route's request type or a clear
//! error, and each request checks into values within their bounds or a clear error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use morph_server::api::requests::{EmbedRequest, EmbeddingsRequest, GenerationRequest};
use morph_server::api::{parse, validate};
use morph_server::infer::GenerationFormat;

fuzz_target!(|data: &[u8]| {
    if let Ok(request) = parse::<EmbeddingsRequest>(data)
        && let Ok(call) = validate::embeddings(request, 64, "m")
    {
        assert!(!call.texts.is_empty() && call.texts.len() <= 64 && call.texts.iter().all(|t| !t.is_empty()));
    }
    if let Ok(request) = parse::<EmbedRequest>(data) {
        let _ = validate::embed(request, 64);
    }
    for format in [GenerationFormat::Completion, GenerationFormat::Chat] {
        if let Ok(request) = parse::<GenerationRequest>(data)
            && let Ok(call) = validate::generation(request, format, "m", 2048)
        {
            assert!((0.0..=2.0).contains(&call.sampling.temperature));
            assert!((1..=2048).contains(&call.max_tokens));
        }
    }
});
