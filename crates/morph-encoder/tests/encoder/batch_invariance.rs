//! A text's vector does not depend on its neighbours: texts of 1 to 500 tokens, each embedded
//! alone and inside one batch with the others and random neighbours of up to 500 tokens, get
//! the same vector (cosine ≥ 0.99999) at int8 and at fp32, in every layout an instance can
//! have: padded dynamic shapes on two threads and on one, a fixed shape, and three pipeline
//! stages handing hidden states on. Int8 quantises each token row on its own scale; with one
//! scale per batch (`DynamicQuantizeMatMul`), a short text beside long ones moved to cosine
//! 0.991–0.994, so the check can fail.

use morph_core::fixtures::random_ids;
use morph_core::{ModelId, RuntimeSpec, StageSpec, TokenPlan, UnitSpec};
use morph_encoder::onnx::Dtype;
use morph_encoder::pooling::cosine;
use morph_encoder::{OrtEncoder, Pooling, TextTokenizer};
use morph_engine::{BatchInput, Engine};
use morph_fetch::{ModelFiles, ModelSource};
use morph_fetch::{Pip, fetch, morph_home, onnxruntime_library};

/// The cosine a text's vector keeps to itself alone, in any batch.
const SAME_VECTOR: f32 = 0.99999;
/// The longest text and batch row.
const LONGEST: u32 = 512;

/// How an instance runs a batch.
#[derive(Debug, Clone, Copy)]
enum Layout {
    Dynamic {
        threads: u16,
    },
    Fixed,
    /// Three stages of two layers each.
    ThreeStages,
}

/// The probes (1 to 500 tokens, real sentences among them) and the batch that holds them all
/// beside random neighbours, each probe's row in it.
fn probes_and_batch(files: &ModelFiles) -> (Vec<Vec<u32>>, Vec<Vec<u32>>, Vec<usize>) {
    let tokenizer = TextTokenizer::load(&files.tokenizer).expect("tokenizer");
    let mut probes: Vec<Vec<u32>> =
        ["ok", "A man is eating food."].iter().map(|s| tokenizer.encode(s).expect("tokenize")).collect();
    probes.push(vec![101]);
    probes.extend([9, 40, 128, 300, 500].iter().enumerate().map(|(i, &len)| random_ids(len, 70 + i as u64)));
    let neighbours =
        [497, 2, 260, 31, 500, 77].iter().enumerate().map(|(i, &len)| random_ids(len, 90 + i as u64));
    // Probes and neighbours interleaved, so that each probe sits beside longer and shorter rows.
    let mut batch = Vec::new();
    let mut rows = Vec::new();
    let mut neighbours = neighbours.into_iter();
    for probe in &probes {
        batch.extend(neighbours.next());
        rows.push(batch.len());
        batch.push(probe.clone());
    }
    (probes, batch, rows)
}

/// Runs `inputs` through one instance (or a chain of stage instances) of `layout`.
fn embed(encoder: &OrtEncoder, layout: Layout, inputs: &[Vec<u32>]) -> Vec<Vec<f32>> {
    let rows = inputs.len() as u32;
    let whole = |spec: RuntimeSpec, threads: u16| {
        let unit = UnitSpec::batch(spec).with_threads(threads);
        let mut instance = encoder.instance(unit, &[TokenPlan::Plain]).expect("instance");
        instance.embed(inputs).expect("embed")
    };
    match layout {
        Layout::Dynamic { threads } => whole(RuntimeSpec::dynamic(LONGEST, rows), threads),
        Layout::Fixed => whole(RuntimeSpec::fixed(LONGEST, rows), 2),
        Layout::ThreeStages => {
            let spec = RuntimeSpec::dynamic(LONGEST, rows);
            let mut stages = (0..3).map(|index| {
                let stage = StageSpec::even(ModelId(0), index, 3, 6);
                let unit = UnitSpec::batch(spec).with_stage(stage).with_threads(1);
                encoder.instance(unit, &[TokenPlan::Plain]).expect("stage")
            });
            let mut first = stages.next().expect("stage 0");
            let mut hidden = first.run(BatchInput::Tokens(inputs), TokenPlan::Plain).expect("stage 0");
            for mut stage in stages {
                hidden = stage.run(BatchInput::Hidden(&hidden), TokenPlan::Plain).expect("stage");
            }
            hidden
        }
    }
}

#[test]
fn a_texts_vector_is_the_same_alone_and_in_any_batch_at_int8_and_fp32_in_every_layout() {
    let home = morph_home();
    let files = fetch(&ModelSource::Default, &home).expect("the default model");
    let library = onnxruntime_library(None, &home, &Pip::from_env()).expect("ONNX Runtime");
    let (probes, batch, rows) = probes_and_batch(&files);
    for dtype in [Dtype::Int8, Dtype::Fp32] {
        let encoder = OrtEncoder::load(&files, Pooling::Mean, &library).and_then(|e| e.with_dtype(dtype));
        let encoder = encoder.expect("encoder");
        for layout in [
            Layout::Dynamic { threads: 2 },
            Layout::Dynamic { threads: 1 },
            Layout::Fixed,
            Layout::ThreeStages,
        ] {
            let batched = embed(&encoder, layout, &batch);
            for (probe, &row) in probes.iter().zip(&rows) {
                let alone = embed(&encoder, layout, std::slice::from_ref(probe));
                let c = cosine(&alone[0], &batched[row]);
                assert!(
                    c >= SAME_VECTOR,
                    "{dtype} {layout:?}: a {}-token text alone and in a batch of {}: cosine {c}",
                    probe.len(),
                    batch.len()
                );
            }
        }
    }
}
