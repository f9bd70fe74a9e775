//! Training prompts (OTAS γ > 0) through the frozen all-MiniLM-L6-v2 lowers its loss, the same
//! way every time, and moves the prompts themselves. The model comes through Morph's own fetch
//! (cached in MORPH_HOME); the labelled text is `../shared/data/text`.

use morph_core::PromptMode;
use morph_encoder::bert::Kernels;
use morph_encoder::{Encoder, Pooling, TextTokenizer};
use morph_fetch::{ModelSource, fetch, morph_home};
use morph_train::TrainConfig;
use morph_train::tasks::data::{Example, Task, load};
use morph_train::tasks::prompt_train::{PromptSpec, train_prompts};

#[test]
fn prompt_training_lowers_its_loss_on_a_small_fixed_set() {
    let data =
        load(Task::Sst2, &morph_assets::shared_data().join("text")).expect("SST-2 from ../shared/data/text");
    let home = morph_home();
    let files = fetch(&ModelSource::Default, &home).expect("model");
    // On candle's kernels: differentiable.
    let candle = Encoder::load_with(&files, Pooling::Mean, Kernels::Candle).expect("candle weights");
    let tokenizer = TextTokenizer::load(&files.tokenizer).expect("tokenizer");
    let encode = |examples: &[Example]| -> (Vec<Vec<u32>>, Vec<u32>) {
        examples.iter().map(|e| (tokenizer.encode(&e.text).expect("tokenize"), e.label as u32)).unzip()
    };
    let (train_ids, train_labels) = encode(&data.train[..48]);
    let (val_ids, val_labels) = encode(&data.train[48..64]);
    let spec =
        PromptSpec { prefix: "sst2.2", p: 2, mode: PromptMode::Additive, classes: 2, start_head: None };
    let config = TrainConfig { epochs: 4, lr: 0.01, batch: 16, seed: 0 };
    let trained =
        train_prompts(&candle, &spec, (&train_ids, &train_labels), (&val_ids, &val_labels), &config)
            .expect("training");
    let losses = &trained.losses;
    assert!(losses.last().expect("epochs") < &losses[0], "losses {losses:?}");
    // Seeded prompts, a zero head and a seeded minibatch order: trained again, the same run.
    let again = train_prompts(&candle, &spec, (&train_ids, &train_labels), (&val_ids, &val_labels), &config)
        .expect("training again");
    assert_eq!(&again.losses, losses);
    assert_eq!(trained.prompts.dims(), &[6, 2, 384]);
    // The prompts learned (not only the head): no epoch leaves them as drawn.
    let drawn = train_prompts(
        &candle,
        &spec,
        (&train_ids, &train_labels),
        (&val_ids, &val_labels),
        &TrainConfig { epochs: 0, ..config },
    )
    .expect("no training");
    let moved = (&trained.prompts - &drawn.prompts).unwrap().abs().unwrap().max_all().unwrap();
    assert!(moved.to_scalar::<f32>().unwrap() > 1e-4, "the prompts never moved from their draw");
    assert!(trained.weights.contains_key("sst2.2.weight"));
}
