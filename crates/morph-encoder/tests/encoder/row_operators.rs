//! Morph's own ONNX Runtime operators (`RowQuantize`, `RowRescale`, `TileProduct`) in a real
//! session, through the one-product model the int8 graphs are made of: each row's result is
//! the same, to the bit, alone and in a batch; it is the fp32 product within int8's error; an
//! all-zero row is the bias alone; the tile kernel (AMX, or VNNI), the bias added as it
//! scales the rows back, gives ONNX Runtime's own kernel's results followed by `RowRescale`,
//! to the bit.

use morph_encoder::onnx::precision::IntegerKernel;
use morph_encoder::onnx::product::{A, Product, Y, product_model};
use morph_encoder::ort_kernels::tiles;
use morph_encoder::ort_session::{environment, session};
use morph_fetch::{Pip, morph_home, onnxruntime_library};
use ort::session::Session;
use ort::value::Tensor;

/// The product's inner and outer widths: not multiples of the kernels' lanes, so the row tails
/// are exercised too.
const K: usize = 37;
const N: usize = 19;

fn product(m: usize, kind: Product) -> Session {
    product_of(m, K, N, kind)
}

fn product_of(m: usize, k: usize, n: usize, kind: Product) -> Session {
    let library = onnxruntime_library(None, &morph_home(), &Pip::from_env()).expect("ONNX Runtime");
    let env = environment(&library).expect("ONNX Runtime");
    session(env, &product_model(m, k, n, kind), 1, &[]).expect("a session of the product")
}

fn run(session: &mut Session, rows: &[Vec<f32>]) -> Vec<Vec<f32>> {
    try_run(session, rows).expect("run")
}

fn try_run(session: &mut Session, rows: &[Vec<f32>]) -> ort::Result<Vec<Vec<f32>>> {
    let a: Vec<f32> = rows.concat();
    let input = Tensor::from_array(([rows.len(), rows[0].len()], a))?;
    let out = session.run(ort::inputs![A => input])?;
    let (shape, y) = out[Y].try_extract_tensor::<f32>()?;
    Ok(y.chunks(shape[1] as usize).map(<[f32]>::to_vec).collect())
}

/// `m` rows of `k` of varied ranges.
fn rows_of(m: usize, k: usize) -> Vec<Vec<f32>> {
    (0..m)
        .map(|r| {
            let range = [0.01, 1.0, 40.0, 3.0][r % 4];
            (0..k).map(|i| ((i * 13 + r * 7) % 23) as f32 / 11.0 - 1.0).map(|v| v * range).collect()
        })
        .collect()
}

#[test]
fn the_tile_kernel_gives_onnx_runtime_s_results_to_the_bit_or_a_clear_error_without_tiles() {
    // Shapes for each of the kernel's paths: k below one tile (every block copied), k past a
    // tile boundary with rows beyond one block (blocks read in place, the last copied), and
    // columns that do not fill a block.
    for (m, k, n) in [(5, K, N), (70, 390, 48), (33, 64, 40)] {
        let rows = rows_of(m, k);
        let mut tiled = product_of(m, k, n, Product::Int8(IntegerKernel::Tiles));
        if !tiles::available() {
            let error = try_run(&mut tiled, &rows).expect_err("tiles without AMX or VNNI").to_string();
            assert!(error.contains("neither AMX int8 tiles nor AVX-512 VNNI"), "{error}");
            continue;
        }
        let mlas = run(&mut product_of(m, k, n, Product::Int8(IntegerKernel::Mlas)), &rows);
        assert_eq!(run(&mut tiled, &rows), mlas, "{m} x {k} x {n}");
    }
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
    let batched =
        run(&mut product(rows.len(), Product::Int8(IntegerKernel::for_host().expect("a kernel"))), &rows);
    let mut alone = product(1, Product::Int8(IntegerKernel::for_host().expect("a kernel")));
    for (row, in_batch) in rows.iter().zip(&batched) {
        assert_eq!(&run(&mut alone, std::slice::from_ref(row))[0], in_batch, "a row moved with its batch");
    }
    let exact = run(&mut product(rows.len(), Product::Fp32), &rows);
    assert_eq!(batched[3], exact[3], "the all-zero row is the bias alone");
    for (r, (int8, fp32)) in batched.iter().zip(&exact).enumerate() {
        let scale = fp32.iter().fold(0f32, |m, y| m.max(y.abs()));
        for (a, b) in int8.iter().zip(fp32) {
            assert!((a - b).abs() <= 0.02 * scale + 1e-6, "row {r}: int8 {a} against fp32 {b}");
        }
    }
}
