//! Int8 encoder graphs (`--dtype int8`) against fp32, in one run, on all-MiniLM-L6-v2:
//! - per corpus (SST-2 sentences, AG News title + description, a 50/50 mix of the two): each
//!   int8 vector's cosine to its fp32 twin (mean and least), and the time to embed the corpus in
//!   batches of 8 on one 2-thread instance (rounds interleave the two; ratio fp32 / int8);
//! - per OTAS task (SST-2, AG News, SMS spam): the shipped head's accuracy on the test split
//!   with fp32 and with int8 vectors;
//! - ONNX Runtime's own matrix products on these cores: fp32 MatMul and int8 (each row on its
//!   own scale, as the graphs write it: `MatMulIntegerToFloat` and its row scaling) in GFLOP/s (2·m·k·n per call) at MiniLM's feed-forward shape (one
//!   batch of 8 × 128 tokens) and a large square, and whether a bf16 MatMul session builds;
//!   MiniLM's own sessions then stand against that peak, and so does the layout served on this
//!   host's cores (one single-threaded int8 instance per core, side by side).
//!
//! Reads `../shared/data/text`. `cargo bench -p morph-benches --bench int8_graphs [-- --texts N --rounds R]`

use std::time::Instant;

use morph_backend::tuning::reexec_tuned;
use morph_core::{RuntimeSpec, TokenPlan, UnitSpec};
use morph_encoder::onnx::Dtype;
use morph_encoder::onnx::precision::IntegerKernel;
use morph_encoder::onnx::product::{A, Product, Y, product_model};
use morph_encoder::ort_kernels::tiles;
use morph_encoder::ort_session::{environment, session};
use morph_encoder::pooling::cosine;
use morph_encoder::tasks::served::TaskHeads;
use morph_encoder::{OrtEncoder, Pooling, TextTokenizer};
use morph_engine::Engine;
use morph_engine::timing::median;
use morph_fetch::{ModelSource, Pip, fetch, morph_home, onnxruntime_library};
use morph_train::tasks::data::{Task, load};

use morph_benches::cli_arg;

const BATCH: usize = 8;

fn main() {
    reexec_tuned();
    let texts: usize = cli_arg("--texts", 400);
    let rounds: usize = cli_arg("--rounds", 3);
    let home = morph_home();
    let files = fetch(&ModelSource::Default, &home).expect("the default model");
    let library = onnxruntime_library(None, &home, &Pip::from_env()).expect("ONNX Runtime");
    let tokenizer = TextTokenizer::load(&files.tokenizer).expect("tokenizer");
    let data_dir = morph_assets::shared_data().join("text");
    let data = |task| load(task, &data_dir).expect("../shared/data/text");
    let spec = RuntimeSpec::dynamic(512, BATCH as u32);
    let encoder = |dtype: Dtype| {
        let encoder = OrtEncoder::load(&files, Pooling::Mean, &library).and_then(|e| e.with_dtype(dtype));
        encoder.expect("encoder")
    };
    let int8_encoder = encoder(Dtype::Int8);
    let mut fp32 = encoder(Dtype::Fp32).runtime(spec).expect("runtime");
    let mut int8 = int8_encoder.runtime(spec).expect("runtime");
    let embed = |rt: &mut dyn Engine, ids: &[Vec<u32>]| -> Vec<Vec<f32>> {
        ids.chunks(BATCH).flat_map(|batch| rt.embed(batch).expect("batch")).collect()
    };
    let ids = |texts: &[String]| -> Vec<Vec<u32>> {
        // Corpus texts fit the model's 512 positions (SST-2 and AG News are far shorter).
        texts.iter().map(|t| tokenizer.encode(t).expect("tokenize").into_iter().take(512).collect()).collect()
    };

    let sst2: Vec<String> = data(Task::Sst2).test.into_iter().map(|e| e.text).take(texts).collect();
    let ag: Vec<String> = data(Task::AgNews).test.into_iter().map(|e| e.text).take(texts).collect();
    let mix: Vec<String> =
        sst2.iter().zip(&ag).flat_map(|(a, b)| [a.clone(), b.clone()]).take(texts).collect();
    println!(
        "int8 against fp32, all-MiniLM-L6-v2, dynamic:512x8, one 2-thread instance, {texts} texts per corpus"
    );
    // The weight products' work per real token (Q/K/V, attention out, feed-forward up and down),
    // for the GFLOP/s each session achieves (padding and attention's own products not counted).
    let (h, layers) = (384.0, 6.0);
    let flops_per_token = 2.0 * 12.0 * h * h * layers;
    println!(
        "{:>10} {:>8} {:>12} {:>12} {:>10} {:>10} {:>9} {:>10} {:>10}",
        "corpus",
        "tokens",
        "mean cos",
        "least cos",
        "fp32 ms",
        "int8 ms",
        "speed-up",
        "fp32 GF/s",
        "int8 GF/s"
    );
    let corpora = [("sst2", &sst2), ("ag_news", &ag), ("mix", &mix)];
    for (name, corpus) in corpora {
        let rows = ids(corpus);
        let tokens = rows.iter().map(Vec::len).sum::<usize>() / rows.len().max(1);
        let (a, b) = (embed(&mut fp32, &rows), embed(&mut int8, &rows));
        let cosines: Vec<f32> = a.iter().zip(&b).map(|(x, y)| cosine(x, y)).collect();
        let mean = cosines.iter().sum::<f32>() / cosines.len() as f32;
        let least = cosines.iter().copied().fold(1.0, f32::min);
        let (mut ta, mut tb) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let started = Instant::now();
            embed(&mut fp32, &rows);
            ta.push(started.elapsed().as_secs_f64() * 1e3);
            let started = Instant::now();
            embed(&mut int8, &rows);
            tb.push(started.elapsed().as_secs_f64() * 1e3);
        }
        let (ta, tb) = (median(ta), median(tb));
        let work = rows.iter().map(Vec::len).sum::<usize>() as f64 * flops_per_token / 1e9;
        println!(
            "{name:>10} {tokens:>8} {mean:>12.5} {least:>12.5} {ta:>10.0} {tb:>10.0} {:>8.2}x {:>10.0} {:>10.0}",
            ta / tb,
            work / (ta / 1e3),
            work / (tb / 1e3)
        );
    }

    let heads = TaskHeads::builtin().expect("the shipped heads");
    println!("\nOTAS tasks: the shipped head's test accuracy (plain plan), {texts} examples per task");
    println!("{:>10} {:>10} {:>10}", "task", "fp32", "int8");
    for task in Task::ALL {
        let test: Vec<_> = data(task).test.into_iter().take(texts).collect();
        let index = heads.find(task.name()).expect("a shipped head");
        let rows = ids(&test.iter().map(|e| e.text.clone()).collect::<Vec<_>>());
        let accuracy = |vectors: Vec<Vec<f32>>| {
            let right = vectors.iter().zip(&test).filter(|(v, e)| {
                let got = heads.classify(index, morph_core::TokenPlan::Plain, v).expect("classify");
                got.label == task.classes()[e.label]
            });
            right.count() as f64 / test.len() as f64
        };
        let (a, b) = (accuracy(embed(&mut fp32, &rows)), accuracy(embed(&mut int8, &rows)));
        println!("{:>10} {:>10.4} {:>10.4}", task.name(), a, b);
    }

    let env = environment(&library).expect("ONNX Runtime");
    println!(
        "\nONNX Runtime's matrix products on this CPU, 2 threads: GFLOP/s (2·m·k·n per call), median of 20"
    );
    println!("{:>22} {:>10} {:>10} {:>10} {:>10}", "m x k x n", "fp32", "int8 MLAS", "int8 tiles", "bf16");
    let mut int8_peak = 0.0f64;
    for (m, k, n) in [(1024, 384, 1536), (2048, 2048, 2048)] {
        let mut cells = Vec::new();
        let int8 = [IntegerKernel::Mlas, IntegerKernel::Tiles].map(Product::Int8);
        for product in [Product::Fp32, int8[0], int8[1], Product::Bf16] {
            let model = product_model(m, k, n, product);
            let cell = match session(env, &model, 2, &[]) {
                Err(e) if product == Product::Bf16 => {
                    eprintln!("bf16 MatMul: {}", e.to_string().lines().next().unwrap_or_default());
                    "no kernel".to_string()
                }
                Err(e) => panic!("{product:?} session: {e}"),
                Ok(_) if product == int8[1] && !tiles::available() => "no AMX or VNNI".to_string(),
                Ok(_) if product == Product::Bf16 => "builds".to_string(),
                Ok(mut s) => {
                    let a: Vec<f32> = (0..m * k).map(|i| ((i * 13 % 97) as f32 / 48.0) - 1.0).collect();
                    let mut times = Vec::new();
                    for _ in 0..22 {
                        let input = ort::value::Tensor::from_array(([m, k], a.clone())).expect("input");
                        let started = Instant::now();
                        let out = s.run(ort::inputs![A => input]).expect("run");
                        times.push(started.elapsed().as_secs_f64());
                        assert!(out.get(Y).is_some());
                    }
                    let gops = 2.0 * (m * k * n) as f64 / median(times.split_off(2)) / 1e9;
                    if int8.contains(&product) {
                        int8_peak = int8_peak.max(gops);
                    }
                    format!("{gops:.0}")
                }
            };
            cells.push(cell);
        }
        let shape = format!("{m} x {k} x {n}");
        println!("{shape:>22} {:>10} {:>10} {:>10} {:>10}", cells[0], cells[1], cells[2], cells[3]);
    }

    // The layout served on this host: one single-threaded instance per core, side by side,
    // taking the batches in turn.
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let unit = UnitSpec { threads: Some(1), ..UnitSpec::batch(spec) };
    let mut instances: Vec<_> =
        (0..cores).map(|_| int8_encoder.instance(unit, &[TokenPlan::Plain]).expect("instance")).collect();
    println!("\nAs served: {cores} single-threaded int8 instances side by side, against the int8 peak above");
    println!("{:>10} {:>10} {:>10} {:>12}", "corpus", "ms", "GOP/s", "of peak");
    for (name, corpus) in corpora {
        let rows = ids(corpus);
        let mut times = Vec::new();
        for _ in 0..rounds {
            let started = Instant::now();
            std::thread::scope(|scope| {
                for (k, rt) in instances.iter_mut().enumerate() {
                    let rows = &rows;
                    scope.spawn(move || {
                        for batch in rows.chunks(BATCH).skip(k).step_by(cores) {
                            rt.embed(batch).expect("batch");
                        }
                    });
                }
            });
            times.push(started.elapsed().as_secs_f64());
        }
        let t = median(times);
        let gops = rows.iter().map(Vec::len).sum::<usize>() as f64 * flops_per_token / 1e9 / t;
        println!("{name:>10} {:>10.0} {gops:>10.0} {:>11.0}%", t * 1e3, 100.0 * gops / int8_peak);
    }
}
