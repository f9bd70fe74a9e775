//! Fine-tuning the length predictor's encoder (its top layer) with the head, on the default
//! encoder (all-MiniLM-L6-v2, fetched by Morph's own fetch into MORPH_HOME): the frozen layers
//! plus the tuned one compute what the whole encoder computes; training moves the tuned layer;
//! the saved encoder serves what training measured.

use candle_nn::VarMap;
use morph_encoder::checkpoint::Checkpoint;
use morph_encoder::predictor::{Buckets, LengthHead, Objective, prompt_ids};
use morph_encoder::{Encoder, TextTokenizer, model_pooling};
use morph_fetch::ModelSource;
use morph_fetch::{fetch, morph_home};
use morph_train::predictor::tune::TunedTop;
use morph_train::{TrainConfig, predictor::train};

const PROMPTS: [&str; 8] = [
    "Write a haiku about the sea.",
    "What is 2 + 2?",
    "Explain how a transformer model attends to earlier tokens, step by step, with an example.",
    "Translate 'good morning' into French.",
    "List ten ideas for a birthday party and describe each in detail.",
    "Yes or no: is the sky blue?",
    "Summarise the plot of a long novel you like in several paragraphs.",
    "Name a colour.",
];
const LENGTHS: [u32; 8] = [40, 5, 250, 8, 256, 3, 240, 2];

/// Each encoder's pooled, L2-normalised vectors of `ids`.
fn served(encoder: &Encoder, ids: &[Vec<u32>]) -> Vec<Vec<f32>> {
    let len = ids.iter().map(Vec::len).max().expect("prompts");
    let mut vectors = encoder.embed_padded(ids, len, ids.len()).expect("embedding");
    vectors.iter_mut().for_each(|v| morph_encoder::pooling::l2_normalize(v));
    vectors
}

fn max_difference(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    a.iter().flatten().zip(b.iter().flatten()).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

#[test]
fn a_tuned_top_layer_trains_and_its_saved_encoder_serves_what_it_learned() {
    let home = morph_home();
    let files = fetch(&ModelSource::Default, &home).expect("fetching the default encoder");
    let pooling = model_pooling(&files.dir).expect("pooling");
    let tokenizer = TextTokenizer::load(&files.tokenizer).expect("tokenizer");
    let ids = prompt_ids(&tokenizer, &PROMPTS).expect("tokenizing");
    let checkpoint = Checkpoint::load(&files).expect("checkpoint");
    let top = TunedTop::new(&checkpoint, 1, pooling).expect("the top layer");
    let states = top.frozen_states(&ids).expect("frozen states");
    let vectors = |top: &TunedTop| -> Vec<Vec<f32>> {
        top.vectors(&states.iter().collect::<Vec<_>>()).expect("vectors").to_vec2().expect("rows")
    };

    // Before training: five frozen layers and the sixth as a variable are the whole encoder.
    let plain = served(&Encoder::load(&files, pooling).expect("encoder"), &ids);
    let before = vectors(&top);
    assert!(max_difference(&before, &plain) < 1e-4, "{}", max_difference(&before, &plain));

    let head_vars = VarMap::new();
    let head = LengthHead::new(&head_vars, 384, 0, Objective::RegressionL1, Buckets::from_lengths(&LENGTHS))
        .expect("head");
    let x = morph_encoder::predictor::stack(&plain).expect("stack");
    train(&head_vars, &head, &x, &LENGTHS, &TrainConfig { epochs: 5, lr: 1e-2, ..TrainConfig::default() })
        .expect("the head alone");
    let config = TrainConfig { epochs: 3, lr: 1e-3, batch: 4, seed: 0 };
    let losses = top.train(&head_vars, &head, &states, &LENGTHS, &config).expect("tuning");
    assert_eq!(losses.len(), 3);
    assert!(losses.iter().all(|l| l.is_finite()), "{losses:?}");
    let after = vectors(&top);
    assert!(max_difference(&after, &before) > 1e-4, "tuning left the top layer as it was");

    // Saved and loaded as any encoder, it gives the tuned vectors (and the same predictions).
    let dir = tempfile::tempdir().expect("tempdir");
    top.save_encoder(&checkpoint, &files, dir.path()).expect("saving");
    let saved = fetch(&ModelSource::Local(dir.path().into()), &home).expect("the saved encoder's files");
    assert_eq!(model_pooling(&saved.dir).expect("pooling"), pooling);
    let reloaded = served(&Encoder::load(&saved, pooling).expect("the saved encoder"), &ids);
    assert!(max_difference(&reloaded, &after) < 1e-4, "{}", max_difference(&reloaded, &after));
    let predicted = top.predict(&head, &states).expect("predicting");
    let from_saved =
        head.predict(&morph_encoder::predictor::stack(&reloaded).expect("stack")).expect("predicting");
    // Equal up to rounding to whole tokens.
    assert!(
        predicted.iter().zip(&from_saved).all(|(a, b)| a.abs_diff(*b) <= 1),
        "{predicted:?} {from_saved:?}"
    );
}
