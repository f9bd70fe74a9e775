//! The ONNX Runtime engine, on the graph Morph writes, against the candle encoder on the real
//! all-MiniLM-L6-v2 weights. Both the model and the ONNX Runtime library come through Morph's
//! own fetch (cached in MORPH_HOME).

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use morph_core::fixtures::random_ids;
use morph_core::{ModelId, RuntimeSpec, StageSpec, TokenPlan, UnitSpec};
use morph_encoder::checkpoint::Checkpoint;
use morph_encoder::onnx::{
    ATTENTION_MASK, GraphOutput, GraphSpec, HIDDEN_IN, HIDDEN_OUT, INPUT_IDS, POOLED, Precision,
    encoder_graph,
};
use morph_encoder::ort_runtime::padded_ids;
use morph_encoder::ort_session::{environment, session};
use morph_encoder::pooling::cosine;
use morph_encoder::{CandleRuntime, Encoder, OrtEncoder, Pooling, TextTokenizer, model_pooling};
use morph_engine::{BatchInput, Engine, EngineError};
use morph_fetch::onnxruntime_library;
use morph_fetch::{ModelFiles, ModelSource};
use morph_fetch::{Pip, fetch, morph_home};
use ort::value::Tensor;

struct Models {
    files: ModelFiles,
    library: PathBuf,
    candle: Arc<Encoder>,
    ort: OrtEncoder,
    tokenizer: TextTokenizer,
}

fn models() -> &'static Models {
    static MODELS: OnceLock<Models> = OnceLock::new();
    MODELS.get_or_init(|| {
        let home = morph_home();
        let files = fetch(&ModelSource::Default, &home).expect("fetching the default model");
        let library = onnxruntime_library(None, &home, &Pip::from_env()).expect("fetching ONNX Runtime");
        let pooling = model_pooling(&files.dir).expect("pooling");
        Models {
            files: files.clone(),
            library: library.clone(),
            candle: Arc::new(Encoder::load(&files, pooling).expect("candle weights")),
            ort: OrtEncoder::load(&files, pooling, &library).expect("ONNX Runtime encoder"),
            tokenizer: TextTokenizer::load(&files.tokenizer).expect("tokenizer"),
        }
    })
}

fn candle(spec: RuntimeSpec) -> CandleRuntime {
    CandleRuntime::new(models().candle.clone(), spec).expect("candle runtime")
}

fn assert_close(a: &[Vec<f32>], b: &[Vec<f32>], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let c = cosine(x, y);
        assert!(c >= 0.99999, "{what}, row {i}: cosine {c}");
    }
}

#[test]
fn reference_sentences_match_candle() {
    let m = models();
    let sentences = [
        "This is an example sentence",
        "A man is eating food.",
        "A man is eating a piece of bread.",
        "The quick brown fox jumps over the lazy dog.",
    ];
    let inputs: Vec<Vec<u32>> = sentences.iter().map(|s| m.tokenizer.encode(s).expect("tokenize")).collect();
    let spec = RuntimeSpec::dynamic(512, 8);
    let want = candle(spec).embed(&inputs).expect("candle");
    let got = m.ort.runtime(spec).expect("ort runtime").embed(&inputs).expect("ort");
    assert_eq!(got[0].len(), 384);
    assert_close(&got, &want, "reference sentences");
}

#[test]
fn random_ids_match_candle_at_lengths_8_to_512() {
    let m = models();
    let spec = RuntimeSpec::dynamic(512, 4);
    let mut ort = m.ort.runtime(spec).expect("ort runtime");
    let mut reference = candle(spec);
    for len in [8, 64, 256, 512] {
        // A full-length row and a shorter one, so padding is exercised at every length.
        let inputs = vec![random_ids(len, len as u64), random_ids(len / 2 + 2, 7)];
        let want = reference.embed(&inputs).expect("candle");
        let got = ort.embed(&inputs).expect("ort");
        assert_close(&got, &want, &format!("length {len}"));
    }
}

#[test]
fn a_sequence_alone_and_inside_a_padded_fixed_runtime_agree() {
    let m = models();
    let target = m.tokenizer.encode("Fixed shapes pad every batch to the same size.").expect("tokenize");
    let alone =
        m.ort.runtime(RuntimeSpec::dynamic(512, 1)).expect("dynamic").embed(std::slice::from_ref(&target));
    let mut fixed = m.ort.runtime(RuntimeSpec::fixed(64, 4)).expect("fixed");
    let neighbours = [random_ids(60, 1), target.clone(), random_ids(5, 2)];
    let in_batch = fixed.embed(&neighbours).expect("fixed batch");
    let fixed_alone = fixed.embed(&[target]).expect("fixed alone");
    let alone = alone.expect("alone");
    assert_close(&[in_batch[1].clone()], &alone, "inside a padded fixed batch");
    assert_close(&fixed_alone, &alone, "alone in a fixed runtime");
}

#[test]
fn runtimes_reject_what_their_shape_cannot_hold() {
    let m = models();
    let mut fixed = m.ort.runtime(RuntimeSpec::fixed(16, 2)).expect("fixed");
    assert!(fixed.embed(&[vec![101; 17]]).is_err());
    assert!(fixed.embed(&vec![vec![101, 102]; 3]).is_err());
    assert!(m.ort.runtime(RuntimeSpec::fixed(513, 1)).is_err());
    assert!(
        m.ort.runtime(RuntimeSpec::fixed(16, 1).with_fallback(513)).is_err(),
        "a fallback past the model"
    );
}

/// A fixed runtime with a dynamic fallback (Arlo's late binding across classes) runs a longer
/// sequence at its own length, with the vector the dynamic runtime gives, and pads the ones that
/// fit as before; past the fallback it refuses.
#[test]
fn a_fixed_runtime_with_a_fallback_runs_longer_sequences_at_their_length() {
    let m = models();
    let long = m.tokenizer.encode(&"a longer sentence than the fixed shape ".repeat(4)).expect("tokenize");
    let short = m.tokenizer.encode("short").expect("tokenize");
    assert!(long.len() > 16 && long.len() <= 64, "{} tokens", long.len());
    let mut dynamic = m.ort.runtime(RuntimeSpec::dynamic(512, 2)).expect("dynamic");
    let mut fallback =
        m.ort.runtime(RuntimeSpec::fixed(16, 2).with_fallback(64)).expect("fixed with fallback");
    let want = dynamic.embed(&[long.clone(), short.clone()]).expect("dynamic");
    assert_close(&fallback.embed(&[long, short.clone()]).expect("past the shape"), &want, "on the fallback");
    assert_close(&fallback.embed(&[short]).expect("within the shape"), &want[1..], "padded to the shape");
    assert!(fallback.embed(&[vec![101; 65]]).is_err());
}

/// Morph's graph written to a file with free dimensions is served as a user's ONNX file, pooled
/// in the graph (`sentence_embedding`) or here (`last_hidden_state`), its free dimensions
/// pinned for a fixed runtime, and priced padded.
#[test]
fn user_onnx_files_are_served_with_their_free_dimensions_pinned() {
    let m = models();
    let checkpoint = Checkpoint::load(&m.files).expect("checkpoint");
    let dir = tempfile::tempdir().expect("tempdir");
    let inputs = vec![random_ids(40, 3), random_ids(9, 4)];
    let mut written = m.ort.runtime(RuntimeSpec::dynamic(512, 4)).expect("written");
    // Morph's own graph removes the padding under the plans that keep every token in place (a
    // batch is priced at its rows' mean length); a user's file is priced padded.
    let plans = [TokenPlan::Plain, TokenPlan::Exit(3), TokenPlan::Merge(2)];
    assert_eq!(plans.map(|plan| written.packs(plan)), [true, true, false]);
    let want = written.embed(&inputs).expect("written");
    for output in [GraphOutput::Pooled(Pooling::Mean), GraphOutput::Hidden] {
        let spec = GraphSpec {
            shape: None,
            layers: 0..6,
            prompt: Vec::new(),
            merge: 0,
            deep_prompts: None,
            prune: None,
            output,
            precision: Precision::Fp32,
            remove_padding: true,
        };
        let path = dir.path().join("model.onnx");
        std::fs::write(&path, encoder_graph(&checkpoint, &spec).expect("graph").to_model_bytes())
            .expect("write");
        let user = OrtEncoder::load_file(&m.files, &path, Pooling::Mean, &m.library).expect("user file");
        assert_eq!(user.dim(), 384);
        for runtime in [RuntimeSpec::dynamic(512, 4), RuntimeSpec::fixed(64, 4)] {
            let mut served = user.runtime(runtime).expect("runtime");
            assert!(!served.packs(TokenPlan::Plain), "a user's file keeps its padding");
            let got = served.embed(&inputs).expect("user file run");
            assert_close(&got, &want, &format!("{output:?} at {runtime}"));
        }
    }
    // Pinning is real: a session with `sequence` pinned to 64 refuses 10 tokens.
    let bytes = std::fs::read(dir.path().join("model.onnx")).expect("read");
    let env = environment(&m.library).expect("environment");
    let mut pinned = session(env, &bytes, 1, &[("sequence".into(), 64)]).expect("pinned session");
    let (ids, mask) = padded_ids(&inputs[1..], 1, 10, 0);
    let tensor = |data: Vec<i64>| Tensor::from_array(([1usize, 10], data)).expect("tensor");
    assert!(pinned.run(ort::inputs![INPUT_IDS => tensor(ids), ATTENTION_MASK => tensor(mask)]).is_err());
}

/// A graph of layers 0..3 handing hidden states to a graph of layers 3..6 computes the whole
/// model (pipeline stages are the same builder with a layer range).
#[test]
fn two_pipeline_stages_compose_to_the_whole_model() {
    let m = models();
    let checkpoint = Checkpoint::load(&m.files).expect("checkpoint");
    let env = environment(&m.library).expect("environment");
    let (rows, len) = (2usize, 48usize);
    let stage = |layers, output| {
        let spec = GraphSpec {
            shape: Some((rows as u32, len as u32)),
            layers,
            prompt: Vec::new(),
            merge: 0,
            deep_prompts: None,
            prune: None,
            output,
            precision: Precision::Fp32,
            remove_padding: true,
        };
        session(env, &encoder_graph(&checkpoint, &spec).expect("graph").to_model_bytes(), 2, &[])
            .expect("session")
    };
    let mut first = stage(0..3, GraphOutput::Hidden);
    let mut second = stage(3..6, GraphOutput::Pooled(Pooling::Mean));
    let inputs = vec![random_ids(48, 5), random_ids(20, 6)];
    let (ids, mask) = padded_ids(&inputs, rows, len, 0);
    let tensor = |data: Vec<i64>| Tensor::from_array(([rows, len], data)).expect("tensor");
    let hidden = {
        let out = first
            .run(ort::inputs![INPUT_IDS => tensor(ids), ATTENTION_MASK => tensor(mask.clone())])
            .expect("stage 1");
        let (shape, data) = out[HIDDEN_OUT].try_extract_tensor::<f32>().expect("hidden");
        Tensor::from_array((shape.to_vec(), data.to_vec())).expect("hidden tensor")
    };
    let out = second.run(ort::inputs![HIDDEN_IN => hidden, ATTENTION_MASK => tensor(mask)]).expect("stage 2");
    let (_, pooled) = out[POOLED].try_extract_tensor::<f32>().expect("pooled");
    let got: Vec<Vec<f32>> = pooled.chunks_exact(384).map(<[f32]>::to_vec).collect();
    let want = candle(RuntimeSpec::dynamic(512, 2)).embed(&inputs).expect("candle");
    assert_close(&got, &want, "stages 0..3 then 3..6");
}

/// Attention over packed tokens is Morph's one operator a layer (no `Softmax` left), and gives
/// the padded graph's vectors for rows of different lengths in one batch.
#[test]
fn packed_attention_is_one_operator_a_layer_and_gives_the_padded_graph_s_vectors() {
    let m = models();
    let checkpoint = Checkpoint::load(&m.files).expect("checkpoint");
    let layers = checkpoint.config.num_hidden_layers;
    let env = environment(&m.library).expect("environment");
    let (rows, len) = (3usize, 70usize);
    let inputs = vec![random_ids(70, 7), random_ids(3, 8), random_ids(33, 9)];
    let (ids, mask) = padded_ids(&inputs, rows, len, 0);
    let vectors = |remove_padding| {
        let spec = GraphSpec { remove_padding, ..GraphSpec::pooled(None, Pooling::Mean, layers) };
        let graph = encoder_graph(&checkpoint, &spec).expect("graph");
        let count = |op| graph.nodes.iter().filter(|n| n.op == op).count();
        let ops = (count("PackedAttention"), count("Softmax"));
        let mut session = session(env, &graph.to_model_bytes(), 1, &[]).expect("session");
        let tensor = |data: &[i64]| Tensor::from_array(([rows, len], data.to_vec())).expect("tensor");
        let out = session
            .run(ort::inputs![INPUT_IDS => tensor(&ids), ATTENTION_MASK => tensor(&mask)])
            .expect("run");
        let (_, pooled) = out[POOLED].try_extract_tensor::<f32>().expect("pooled");
        (ops, pooled.chunks_exact(384).map(<[f32]>::to_vec).collect::<Vec<_>>())
    };
    let (packed_ops, packed) = vectors(true);
    let (padded_ops, padded) = vectors(false);
    assert_eq!((packed_ops, padded_ops), ((layers, 0), (0, layers)));
    assert_close(&packed, &padded, "packed attention against the padded graph");
}

/// Through the engine contract: all-MiniLM-L6-v2 cut into 3 stages of 2 layers (dynamic
/// shapes, rows of different lengths), each stage's hidden states handed to the next, gives
/// the unsplit model's vectors; a token plan of −1 runs the merging graph of the same unit.
#[test]
fn three_stage_instances_hand_on_to_the_unsplit_vectors_and_plans_pick_their_graph() {
    let m = models();
    let runtime = RuntimeSpec::dynamic(128, 4);
    let stage = |index: u16| {
        let s = StageSpec::even(ModelId(0), index, 3, 6);
        m.ort
            .instance(UnitSpec::batch(runtime).with_stage(s).with_threads(1), &[TokenPlan::Plain])
            .expect("stage")
    };
    let inputs = vec![random_ids(60, 21), random_ids(9, 22), random_ids(33, 23)];
    let (mut s0, mut s1, mut s2) = (stage(0), stage(1), stage(2));
    let h0 = s0.run(BatchInput::Tokens(&inputs), TokenPlan::Plain).expect("stage 0");
    assert_eq!(h0.iter().map(|h| h.len() / 384).collect::<Vec<_>>(), vec![60, 9, 33], "each row's tokens");
    let h1 = s1.run(BatchInput::Hidden(&h0), TokenPlan::Plain).expect("stage 1");
    let pooled = s2.run(BatchInput::Hidden(&h1), TokenPlan::Plain).expect("stage 2");
    let whole = m.ort.runtime(runtime).expect("whole").embed(&inputs).expect("whole");
    for (a, b) in pooled.iter().zip(&whole) {
        assert!(cosine(a, b) >= 0.99999, "split vs unsplit: cosine {}", cosine(a, b));
    }
    assert!(matches!(
        s1.run(BatchInput::Tokens(&inputs), TokenPlan::Plain),
        Err(EngineError::Unsupported(_))
    ));
    assert!(matches!(
        s0.run(BatchInput::Tokens(&inputs), TokenPlan::Merge(1)),
        Err(EngineError::Unsupported(_))
    ));

    let plans = [TokenPlan::Plain, TokenPlan::Merge(1)];
    let mut both = m.ort.instance(UnitSpec::batch(runtime), &plans).expect("plain and merging sessions");
    let plain = both.run(BatchInput::Tokens(&inputs), TokenPlan::Plain).expect("plain");
    let merged = both.run(BatchInput::Tokens(&inputs), TokenPlan::Merge(1)).expect("merged");
    assert_close(&plain, &whole, "the plain plan is the plain model");
    let c = cosine(&merged[0], &plain[0]);
    assert!((0.9..0.99999).contains(&c), "plan −1 merges: cosine {c}");
}

/// Prompt vectors equal to the word embeddings of two tokens give the same vectors as those two
/// tokens written into the input after [CLS] (prompts get positions 1 and 2, the rest shift).
#[test]
fn prompt_tokens_act_as_inserted_input_embeddings() {
    let m = models();
    let checkpoint = Checkpoint::load(&m.files).expect("checkpoint");
    let env = environment(&m.library).expect("environment");
    let word = checkpoint.get("embeddings.word_embeddings.weight").expect("word embeddings");
    let (a, b) = (2023u32, 7592u32);
    let prompt = [a, b].map(|t| word.get(t as usize).and_then(|r| r.to_vec1::<f32>()).expect("row")).to_vec();
    let run = |prompt: Vec<Vec<f32>>, inputs: &[Vec<u32>]| {
        let spec = GraphSpec {
            shape: None,
            layers: 0..6,
            prompt,
            merge: 0,
            deep_prompts: None,
            prune: None,
            output: GraphOutput::Pooled(Pooling::Mean),
            precision: Precision::Fp32,
            remove_padding: true,
        };
        let bytes = encoder_graph(&checkpoint, &spec).expect("graph").to_model_bytes();
        let mut s = session(env, &bytes, 2, &[]).expect("session");
        let len = inputs.iter().map(Vec::len).max().expect("inputs");
        let (ids, mask) = padded_ids(inputs, inputs.len(), len, 0);
        let tensor = |data: Vec<i64>| Tensor::from_array(([inputs.len(), len], data)).expect("tensor");
        let out = s.run(ort::inputs![INPUT_IDS => tensor(ids), ATTENTION_MASK => tensor(mask)]).expect("run");
        let (_, pooled) = out[POOLED].try_extract_tensor::<f32>().expect("pooled");
        pooled.chunks_exact(384).map(<[f32]>::to_vec).collect::<Vec<_>>()
    };
    let inputs = vec![random_ids(30, 8), random_ids(12, 9)];
    let written: Vec<Vec<u32>> = inputs.iter().map(|ids| [&ids[..1], &[a, b], &ids[1..]].concat()).collect();
    let with_prompt = run(prompt, &inputs);
    assert_close(&with_prompt, &run(Vec::new(), &written), "prompt vs inserted tokens");
    let without = run(Vec::new(), &inputs);
    assert!(cosine(&with_prompt[0], &without[0]) < 0.999, "the prompt must change the vector");
}

/// Token merging: the same vector for a sentence alone and inside a padded batch (padding is
/// never merged into real tokens and does not shift the matching); close to the unmerged model
/// but not equal to it, and further as more tokens are merged.
#[test]
fn token_merging_ignores_padding_and_stays_close_to_the_full_model() {
    let m = models();
    let checkpoint = Checkpoint::load(&m.files).expect("checkpoint");
    let env = environment(&m.library).expect("environment");
    let run = |rows: usize, len: usize, merge: usize, inputs: &[Vec<u32>]| {
        let spec = GraphSpec {
            shape: Some((rows as u32, len as u32)),
            layers: 0..6,
            prompt: Vec::new(),
            merge,
            deep_prompts: None,
            prune: None,
            output: GraphOutput::Pooled(Pooling::Mean),
            precision: Precision::Fp32,
            remove_padding: true,
        };
        let bytes = encoder_graph(&checkpoint, &spec).expect("graph").to_model_bytes();
        let mut s = session(env, &bytes, 2, &[]).expect("session");
        let (ids, mask) = padded_ids(inputs, rows, len, 0);
        let tensor = |data: Vec<i64>| Tensor::from_array(([rows, len], data)).expect("tensor");
        let out = s.run(ort::inputs![INPUT_IDS => tensor(ids), ATTENTION_MASK => tensor(mask)]).expect("run");
        let (_, pooled) = out[POOLED].try_extract_tensor::<f32>().expect("pooled");
        pooled.chunks_exact(384).take(inputs.len()).map(<[f32]>::to_vec).collect::<Vec<_>>()
    };
    let target = m
        .tokenizer
        .encode(
            "Token merging averages the most similar tokens of a sequence, layer after layer, to save time.",
        )
        .expect("tokenize");
    let len = target.len();
    let alone = run(1, len, 3, std::slice::from_ref(&target));
    let padded = run(3, 64, 3, &[random_ids(64, 10), target.clone(), random_ids(7, 11)]);
    assert_close(&padded[1..2], &alone, "merged, alone vs in a padded batch");
    let full = run(1, len, 0, std::slice::from_ref(&target));
    // Merging 1 token per layer (6 of 22) changes the vector a little; 3 per layer (18 of 22)
    // more (measured: cosine 0.976 and 0.813).
    let gentle = run(1, len, 1, std::slice::from_ref(&target));
    let c = cosine(&gentle[0], &full[0]);
    assert!((0.95..0.99999).contains(&c), "merging 1 per layer vs the full model: cosine {c}");
    assert!(cosine(&alone[0], &full[0]) < c, "merging more must move further");
    let too_many = GraphSpec { merge: len, ..GraphSpec::pooled(Some((1, len as u32)), Pooling::Mean, 6) };
    assert!(encoder_graph(&checkpoint, &too_many).is_err());
}

/// An exit plan (−104: pooled after 4 of the 6 layers) is the mean of the hidden states that a
/// stage of layers 0..4 hands on; an exit past the last layer is refused. Merging 4 tokens a
/// layer on a dynamic batch of 4- and 5-token rows clamps (ToMe's r ≤ (n − 1) / 2) instead of
/// failing.
#[test]
fn an_exit_plan_pools_its_layers_and_merging_clamps_on_short_rows() {
    let m = models();
    let runtime = RuntimeSpec::dynamic(128, 4);
    let inputs = vec![random_ids(40, 31), random_ids(7, 32)];
    let exit = TokenPlan::Exit(4);
    let pooled = m
        .ort
        .instance(UnitSpec::batch(runtime), &[exit])
        .expect("exit plan")
        .run(BatchInput::Tokens(&inputs), exit);
    let pooled = pooled.expect("exit after 4 layers");
    let stage = StageSpec { model: ModelId(0), index: 0, count: 2, first_layer: 0, end_layer: 4 };
    let mut first =
        m.ort.instance(UnitSpec::batch(runtime).with_stage(stage), &[TokenPlan::Plain]).expect("stage");
    let hidden = first.run(BatchInput::Tokens(&inputs), TokenPlan::Plain).expect("layers 0..4");
    let means: Vec<Vec<f32>> = hidden
        .iter()
        .map(|h| {
            let n = h.len() / 384;
            (0..384).map(|d| (0..n).map(|t| h[t * 384 + d]).sum::<f32>() / n as f32).collect()
        })
        .collect();
    assert_close(&pooled, &means, "exit after 4 layers = mean of layer 4's states");
    let whole = m.ort.runtime(runtime).expect("whole").embed(&inputs).expect("whole");
    assert!(cosine(&pooled[0], &whole[0]) < 0.999, "two fewer layers change the vector");
    assert!(
        m.ort.instance(UnitSpec::batch(runtime), &[TokenPlan::Exit(6)]).is_err(),
        "6 layers: exits 1 to 5"
    );

    let short = vec![random_ids(5, 33), random_ids(4, 34)];
    let mut merging = m.ort.instance(UnitSpec::batch(runtime), &[TokenPlan::Merge(4)]).expect("merging");
    let vectors = merging
        .run(BatchInput::Tokens(&short), TokenPlan::Merge(4))
        .expect("a short batch merges what it can");
    assert!(vectors.iter().flatten().all(|x| x.is_finite()));
}

/// Pruning half the tokens once after layer 2 (−1250): a long row loses tokens and its vector
/// moves; a short row inside the same padded batch gives up only padding (ranked first to go),
/// so its vector is the plain model's.
#[test]
fn pruning_once_drops_padding_first_and_then_the_least_attended_tokens() {
    let m = models();
    let runtime = RuntimeSpec::dynamic(128, 4);
    let prune = TokenPlan::Prune { after: 2, percent: 50 };
    let mut rt = m.ort.instance(UnitSpec::batch(runtime), &[TokenPlan::Plain, prune]).expect("pruning plan");
    let inputs = vec![random_ids(40, 41), random_ids(7, 42)];
    let pruned = rt.run(BatchInput::Tokens(&inputs), prune).expect("pruned");
    let plain = rt.run(BatchInput::Tokens(&inputs), TokenPlan::Plain).expect("plain");
    let c = cosine(&pruned[0], &plain[0]);
    assert!((0.7..0.999).contains(&c), "40 tokens cut to 20 after layer 2: cosine {c}");
    assert_close(&pruned[1..], &plain[1..], "a 7-token row padded to 40 keeps its tokens");
    assert!(
        m.ort.instance(UnitSpec::batch(runtime), &[TokenPlan::Prune { after: 6, percent: 50 }]).is_err(),
        "after the last layer"
    );
}
