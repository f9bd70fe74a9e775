//! Morph's own ONNX Runtime operators (`RowQuantize`, `RowRescale`) in a real session, through
//! the one-product model the int8 graphs are made of: each row's result is the same, to the
//! bit, alone and in a batch; it is the fp32 product within int8's error; an all-zero row
//! stays zero.

use morph_encoder::onnx::product::{A, Product, Y, product_model};
use morph_encoder::ort_session::{environment, session};
use morph_fetch::{Pip, morph_home, onnxruntime_library};
use ort::session::Session;
use ort::value::Tensor;

/// The product's inner and outer widths: not multiples of the kernels' lanes, so the row tails
/// are exercised too.
const K: usize = 37;
const N: usize = 19;

fn product(m: usize, kind: Product) -> Session {
    let library = onnxruntime_library(None, &morph_home(), &Pip::from_env()).expect("ONNX Runtime");
    let env = environment(&library).expect("ONNX Runtime");
    session(env, &product_model(m, K, N, kind), 1, &[]).expect("a session of the product")
}

fn run(session: &mut Session, rows: &[Vec<f32>]) -> Vec<Vec<f32>> {
    let a: Vec<f32> = rows.concat();
    let input = Tensor::from_array(([rows.len(), K], a)).expect("input");
    let out = session.run(ort::inputs![A => input]).expect("run");
    let (_, y) = out[Y].try_extract_tensor::<f32>().expect("y");
    y.chunks(N).map(<[f32]>::to_vec).collect()
}

#[test]
fn each_row_is_quantised_on_its_own_and_computes_the_product() {
    // Rows of very different ranges (a row of large values beside small ones is what a batch
    // scale would have flattened), and an all-zero row.
    let rows: Vec<Vec<f32>> = (0..5)
        .map(|r| {
            let range = [0.01, 1.0, 40.0, 0.0, 3.0][r];
            (0..K).map(|i| ((i * 13 + r * 7) % 23) as f32 / 11.0 - 1.0).map(|v| v * range).collect()
        })
        .collect();
    let batched = run(&mut product(rows.len(), Product::Int8), &rows);
    let mut alone = product(1, Product::Int8);
    for (row, in_batch) in rows.iter().zip(&batched) {
        assert_eq!(&run(&mut alone, std::slice::from_ref(row))[0], in_batch, "a row moved with its batch");
    }
    assert!(batched[3].iter().all(|&y| y == 0.0), "the all-zero row: {:?}", batched[3]);

    let exact = run(&mut product(rows.len(), Product::Fp32), &rows);
    for (r, (int8, fp32)) in batched.iter().zip(&exact).enumerate() {
        let scale = fp32.iter().fold(0f32, |m, y| m.max(y.abs()));
        for (a, b) in int8.iter().zip(fp32) {
            assert!((a - b).abs() <= 0.02 * scale + 1e-6, "row {r}: int8 {a} against fp32 {b}");
        }
    }
}
