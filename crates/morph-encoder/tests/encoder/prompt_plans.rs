//! Deep prompt plans (OTAS γ > 0) on the real all-MiniLM-L6-v2: the ONNX graph with prompts as a
//! per-row input computes what the candle encoder computes, in both modes; a batch mixing tasks
//! equals each task's own batch; the prompts Morph ships are served by plan. The model and ONNX
//! Runtime come through Morph's own fetch (cached in MORPH_HOME). Training prompts is
//! `morph-train`'s `prompt_training` test.

use std::sync::OnceLock;

use candle_core::{Device, Tensor};
use morph_core::PromptMode;
use morph_core::fixtures::random_ids;
use morph_core::{RuntimeSpec, TaskId, TokenPlan, UnitSpec};
use morph_encoder::bert::Kernels;
use morph_encoder::checkpoint::Checkpoint;
use morph_encoder::onnx::{ATTENTION_MASK, GraphSpec, INPUT_IDS, POOLED, PROMPT_IN, encoder_graph};
use morph_encoder::ort_runtime::padded_ids;
use morph_encoder::ort_session::{environment, session};
use morph_encoder::pooling::cosine;
use morph_encoder::{Encoder, OrtEncoder, Pooling, TextTokenizer};
use morph_engine::{BatchInput, Engine, EngineError};
use morph_fetch::ModelFiles;
use morph_fetch::onnxruntime_library;
use morph_fetch::{Pip, fetch, morph_home};

struct Models {
    files: ModelFiles,
    library: std::path::PathBuf,
    /// On candle's kernels: differentiable, the reference.
    candle: Encoder,
}

fn models() -> &'static Models {
    static MODELS: OnceLock<Models> = OnceLock::new();
    MODELS.get_or_init(|| {
        let home = morph_home();
        let files = fetch(&morph_fetch::ModelSource::Default, &home).expect("fetching the default model");
        let library = onnxruntime_library(None, &home, &Pip::from_env()).expect("fetching ONNX Runtime");
        let candle = Encoder::load_with(&files, Pooling::Mean, Kernels::Candle).expect("candle weights");
        Models { files, library, candle }
    })
}

/// Fixed-seed prompts `[6 layers, p, 384]` at the scale of the hidden states.
fn random_prompts(p: usize, seed: u64) -> Tensor {
    let mut state = seed;
    let values: Vec<f32> = (0..6 * p * 384)
        .map(|_| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect();
    Tensor::from_vec(values, (6, p, 384), &Device::Cpu).expect("prompts")
}

fn assert_close(got: &[f32], want: &[f32], what: &str) {
    let c = cosine(got, want);
    assert!(c >= 0.9999, "{what}: cosine {c}");
}

#[test]
fn onnx_with_per_row_prompts_equals_candle_in_both_modes_and_across_mixed_tasks() {
    let m = models();
    let checkpoint = Checkpoint::load(&m.files).expect("checkpoint");
    let env = environment(&m.library).expect("environment");
    let p = 2;
    let (a, b) = (random_prompts(p, 1), random_prompts(p, 2));
    let inputs = vec![random_ids(30, 3), random_ids(9, 4), random_ids(17, 5)];
    // Rows 0 and 2 are one task (prompts a), row 1 another (prompts b).
    let per_row = [&a, &b, &a];
    for mode in [PromptMode::Additive, PromptMode::Replace] {
        let spec = GraphSpec { deep_prompts: Some((p, mode)), ..GraphSpec::pooled(None, Pooling::Mean, 6) };
        let bytes = encoder_graph(&checkpoint, &spec).expect("graph").to_model_bytes();
        let mut s = session(env, &bytes, 2, &[]).expect("session");
        let (rows, len) = (inputs.len(), 30);
        let (ids, mask) = padded_ids(&inputs, rows, len, 0);
        let ids_tensor =
            |data: Vec<i64>| ort::value::Tensor::from_array(([rows, len], data)).expect("tensor");
        let prompts: Vec<f32> = per_row
            .iter()
            .flat_map(|t| t.flatten_all().and_then(|t| t.to_vec1::<f32>()).expect("values"))
            .collect();
        let prompts = ort::value::Tensor::from_array(([rows, 6, p, 384], prompts)).expect("prompts");
        let out = s
            .run(ort::inputs![INPUT_IDS => ids_tensor(ids), ATTENTION_MASK => ids_tensor(mask), PROMPT_IN => prompts])
            .expect("run");
        let (_, pooled) = out[POOLED].try_extract_tensor::<f32>().expect("pooled");
        let got: Vec<&[f32]> = pooled.chunks_exact(384).collect();
        for (r, row) in inputs.iter().enumerate() {
            // Candle runs each row alone with its own task's prompts: a per-task batch of one.
            let want = m
                .candle
                .pooled_prompted(
                    std::slice::from_ref(row),
                    row.len(),
                    &per_row[r].unsqueeze(0).expect("1"),
                    mode,
                )
                .and_then(|t| Ok(t.get(0)?.to_vec1::<f32>()?))
                .expect("candle");
            assert_close(got[r], &want, &format!("{mode:?}, row {r}"));
        }
        let plain = m
            .candle
            .pooled(&inputs[..1], 30, 1)
            .and_then(|t| Ok(t.get(0)?.to_vec1::<f32>()?))
            .expect("plain");
        assert!(cosine(got[0], &plain) < 0.999, "{mode:?}: the prompts must change the vector");
    }
}

#[test]
fn the_shipped_prompts_are_served_by_plan_for_a_batch_mixing_tasks() {
    let m = models();
    let ort = OrtEncoder::load(&m.files, Pooling::Mean, &m.library).expect("encoder");
    let tokenizer = TextTokenizer::load(&m.files.tokenizer).expect("tokenizer");
    let inputs: Vec<Vec<u32>> =
        ["a gorgeous, witty film", "Stocks fell on Wall Street today.", "WIN a free prize now!!"]
            .iter()
            .map(|t| tokenizer.encode(t).expect("tokenize"))
            .collect();
    let tasks = [TaskId(0), TaskId(1), TaskId(2)];
    for plan in [TokenPlan::Prompt(2, PromptMode::Additive), TokenPlan::Prompt(2, PromptMode::Replace)] {
        let mut rt = ort
            .instance(UnitSpec::batch(RuntimeSpec::dynamic(128, 4)), &[TokenPlan::Plain, plan])
            .expect("instance");
        let mixed = rt.run(BatchInput::Tasked(&inputs, &tasks), plan).expect("mixed batch");
        for (r, row) in inputs.iter().enumerate() {
            let alone =
                rt.run(BatchInput::Tasked(std::slice::from_ref(row), &tasks[r..=r]), plan).expect("alone");
            assert_close(&mixed[r], &alone[0], &format!("plan {plan}, row {r}"));
        }
        let plain = rt.run(BatchInput::Tokens(&inputs), TokenPlan::Plain).expect("plain");
        assert!(cosine(&mixed[0], &plain[0]) < 0.9999, "plan {plan} must differ from the plain model");
        let untasked = rt.run(BatchInput::Tokens(&inputs), plan);
        assert!(matches!(untasked, Err(EngineError::Unsupported(_))), "a prompt plan needs each row's task");
    }
    let untrained = ort.instance(
        UnitSpec::batch(RuntimeSpec::dynamic(128, 4)),
        &[TokenPlan::Prompt(7, PromptMode::Additive)],
    );
    assert!(matches!(untrained, Err(EngineError::Unsupported(_))), "no prompts trained for p = 7");
}
