//! Sessions with Morph's own operators built on several threads at once, the first ones in the
//! process: each is built (ONNX Runtime adds the operators' domain to a process-wide map without
//! a lock, so Morph builds sessions one at a time until the domain is there). Its own test
//! binary, so that no session of another test has added the domain before.

use std::sync::Barrier;

use morph_encoder::onnx::precision::IntegerKernel;
use morph_encoder::onnx::product::{Product, product_model};
use morph_encoder::ort_session::{environment, session};
use morph_fetch::{Pip, morph_home, onnxruntime_library};

/// Threads building their first session together: more than a 2-core host runs at once.
const THREADS: usize = 8;

#[test]
fn the_first_sessions_with_morphs_operators_are_built_on_threads_at_once() {
    let library = onnxruntime_library(None, &morph_home(), &Pip::from_env()).expect("ONNX Runtime");
    let env = environment(&library).expect("ONNX Runtime");
    let model = product_model(4, 16, 8, Product::Int8(IntegerKernel::Mlas));
    let start = Barrier::new(THREADS);
    let built: Vec<Result<(), String>> = std::thread::scope(|threads| {
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                threads.spawn(|| {
                    start.wait();
                    session(env, &model, 1, &[]).map(drop).map_err(|e| e.to_string())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a builder thread")).collect()
    });
    for (i, result) in built.iter().enumerate() {
        assert!(result.is_ok(), "session {i}: {result:?}");
    }
}
