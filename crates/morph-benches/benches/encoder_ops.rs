//! Where one batch's time goes inside ONNX Runtime: the graph Morph writes for
//! all-MiniLM-L6-v2 (fp32 and int8, each with the padding removed between the layers as served,
//! and kept), run on one batch of a corpus (`--corpus`, AG News unless named: the first `--rows`
//! test texts, padded to the longest)
//! with ONNX Runtime's profiler on, and its kernel time summed per operator type (the first
//! run, a warm-up, left out; rounds interleave the graphs). `--save DIR` also writes each graph
//! there as `encoder-{dtype}[-padding-kept].onnx`, to open in Netron or rerun elsewhere.
//! `--onnx NAME=FILE,...` runs other models of the same checkpoint beside them on the same batch
//! (e.g. the int8 export a TEI user serves, `experiments/tei_model.py`): their inputs are fed by
//! name (`input_ids`, `attention_mask`, `token_type_ids` as zeros).
//!
//! Reads `../shared/data/text`. `cargo bench -p morph-benches --bench encoder_ops [-- --rows 8 --runs 20 --threads 2 --corpus ag_news|sst2|sms_spam --onnx tei-int8=model.onnx]`

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use morph_backend::tuning::reexec_tuned;
use morph_encoder::calibration::calibrate;
use morph_encoder::checkpoint::Checkpoint;
use morph_encoder::onnx::{ATTENTION_MASK, GraphSpec, INPUT_IDS, Precision, encoder_graph};
use morph_encoder::ort_kernels::operators;
use morph_encoder::ort_runtime::padded_ids;
use morph_encoder::ort_session::environment;
use morph_encoder::{Pooling, TextTokenizer};
use morph_fetch::{ModelSource, Pip, fetch, morph_home, onnxruntime_library};
use morph_train::tasks::data::{Task, load};
use ort::session::Session;
use ort::session::builder::GraphOptimizationLevel;
use serde_json::Value;

use morph_benches::cli_arg;

fn main() {
    reexec_tuned();
    let rows: usize = cli_arg("--rows", 8);
    let runs: usize = cli_arg("--runs", 20);
    let threads: usize = cli_arg("--threads", 2);
    let corpus: String = cli_arg("--corpus", Task::AgNews.name().to_string());
    let task =
        Task::ALL.into_iter().find(|t| t.name() == corpus).expect("--corpus ag_news, sst2 or sms_spam");
    let save: Option<PathBuf> =
        cli_arg("--save", String::new()).parse().ok().filter(|p: &PathBuf| !p.as_os_str().is_empty());
    let others: String = cli_arg("--onnx", String::new());
    let others: Vec<(String, PathBuf)> = others
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|named| {
            let (name, file) = named.split_once('=').expect("--onnx NAME=FILE");
            (name.to_string(), PathBuf::from(file))
        })
        .collect();
    let home = morph_home();
    let files = fetch(&ModelSource::Default, &home).expect("the default model");
    let library = onnxruntime_library(None, &home, &Pip::from_env()).expect("ONNX Runtime");
    let env = environment(&library).expect("ONNX Runtime");
    let checkpoint = Checkpoint::load(&files).expect("checkpoint");
    let tokenizer = TextTokenizer::load(&files.tokenizer).expect("tokenizer");
    let data_dir = morph_assets::shared_data().join("text");
    let texts = load(task, &data_dir).expect("../shared/data/text").test;
    let ids: Vec<Vec<u32>> = texts
        .iter()
        .take(rows)
        .map(|e| tokenizer.encode(&e.text).expect("tokenize").into_iter().take(512).collect())
        .collect();
    let len = ids.iter().map(Vec::len).max().unwrap_or(1);
    let (input_ids, mask) = padded_ids(&ids, rows, len, checkpoint.config.pad_token_id);
    let scratch = tempfile::tempdir().expect("a scratch directory");
    println!(
        "all-MiniLM-L6-v2, one {corpus} batch of {rows} x {len} tokens ({} real), {threads} threads, kernel time per run (mean of {} runs)",
        ids.iter().map(Vec::len).sum::<usize>(),
        runs - 1
    );
    let outliers = Arc::new(calibrate(env, &checkpoint, &tokenizer).expect("int8 calibration"));
    // Each dtype with the padding removed between the layers (as served) and kept.
    let mut variants = Vec::new();
    for precision in [Precision::Fp32, Precision::Int8(outliers)] {
        for remove_padding in [false, true] {
            let dtype = precision.dtype();
            let spec = GraphSpec {
                precision: precision.clone(),
                remove_padding,
                ..GraphSpec::pooled(None, Pooling::Mean, checkpoint.config.num_hidden_layers)
            };
            let name = if remove_padding { format!("{dtype}") } else { format!("{dtype}-padding-kept") };
            let model = encoder_graph(&checkpoint, &spec).expect("graph").to_model_bytes();
            if let Some(dir) = &save {
                std::fs::create_dir_all(dir).expect("--save directory");
                std::fs::write(dir.join(format!("encoder-{name}.onnx")), &model).expect("write the graph");
            }
            let session = profiled(env, threads, &scratch.path().join(&name), &model).expect("session");
            variants.push((name, session));
        }
    }
    for (name, file) in others {
        let model = std::fs::read(&file).unwrap_or_else(|e| panic!("--onnx {}: {e}", file.display()));
        let session = profiled(env, threads, &scratch.path().join(&name), &model).expect("session");
        variants.push((name, session));
    }
    // Rounds interleave the variants, so a slow spell of this shared host hits them alike.
    for _ in 0..runs {
        for (_, session) in &mut variants {
            let names: Vec<String> = session.inputs().iter().map(|i| i.name().to_string()).collect();
            let feed: Vec<(String, ort::value::DynValue)> = names
                .into_iter()
                .map(|name| {
                    let values = match name.as_str() {
                        INPUT_IDS => input_ids.clone(),
                        ATTENTION_MASK => mask.clone(),
                        TOKEN_TYPE_IDS => vec![0; rows * len],
                        other => panic!("an input this bench cannot feed: {other}"),
                    };
                    let tensor = ort::value::Tensor::from_array(([rows, len], values)).expect("input");
                    (name, tensor.into_dyn())
                })
                .collect();
            session.run(feed).expect("run");
        }
    }
    let splits: Vec<(String, BTreeMap<String, f64>)> = variants
        .into_iter()
        .map(|(name, mut session)| {
            let profile = session.end_profiling().expect("the profile");
            let events: Value = serde_json::from_slice(&std::fs::read(&profile).expect("the profile file"))
                .expect("profile JSON");
            (name, per_op(&events))
        })
        .collect();
    print_split(&splits, runs - 1);
}

/// The token type input of a standard export (every token of type 0 here).
const TOKEN_TYPE_IDS: &str = "token_type_ids";

/// A session of `model` as Morph builds them (every graph rewrite, no spinning), profiling into `path`.
fn profiled(
    env: &ort::environment::Environment,
    threads: usize,
    path: &std::path::Path,
    model: &[u8],
) -> ort::Result<Session> {
    let builder = Session::builder(env)?.with_operators(operators()?)?;
    let builder = builder.with_optimization_level(GraphOptimizationLevel::All)?;
    let builder = builder.with_intra_threads(threads)?.with_inter_threads(1)?;
    let mut builder = builder.with_intra_op_spinning(false)?.with_profiling(path)?;
    builder.commit_from_memory(model)
}

/// Kernel microseconds per operator type over every run but the first.
fn per_op(events: &Value) -> BTreeMap<String, f64> {
    let events = events.as_array().expect("a JSON array of events");
    let first_run_end = events
        .iter()
        .filter(|e| e["name"] == "model_run")
        .map(|e| e["ts"].as_f64().unwrap_or(0.0) + e["dur"].as_f64().unwrap_or(0.0))
        .fold(f64::INFINITY, f64::min);
    let mut split = BTreeMap::new();
    for e in
        events.iter().filter(|e| e["cat"] == "Node" && e["ts"].as_f64().is_some_and(|t| t > first_run_end))
    {
        let (Some(op), Some(name), Some(us)) =
            (e["args"]["op_name"].as_str(), e["name"].as_str(), e["dur"].as_f64())
        else {
            continue;
        };
        if name.ends_with("_kernel_time") {
            *split.entry(op.to_string()).or_insert(0.0) += us;
        }
    }
    split
}

/// One row per operator (the slowest first in the last variant), one column per variant:
/// kernel milliseconds per run.
fn print_split(splits: &[(String, BTreeMap<String, f64>)], runs: usize) {
    let ms = |us: f64| us / runs as f64 / 1e3;
    let Some((_, last)) = splits.last() else { return };
    let mut ops: Vec<&String> = splits.iter().flat_map(|(_, split)| split.keys()).collect();
    ops.sort();
    ops.dedup();
    ops.sort_by(|a, b| last.get(*b).unwrap_or(&0.0).total_cmp(last.get(*a).unwrap_or(&0.0)));
    print!("\n{:>28}", "operator (ms per run)");
    splits.iter().for_each(|(name, _)| print!(" {name:>20}"));
    println!();
    for op in ops {
        print!("{op:>28}");
        splits.iter().for_each(|(_, split)| print!(" {:>20.3}", ms(*split.get(op).unwrap_or(&0.0))));
        println!();
    }
    print!("{:>28}", "kernels per run");
    splits.iter().for_each(|(_, split)| print!(" {:>20.2}", ms(split.values().sum())));
    println!();
}
