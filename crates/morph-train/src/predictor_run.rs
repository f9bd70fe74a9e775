//! Training SSJF's output-length predictor (`morph train predictor`). Embeds each prompt (its last 512
//! tokens; for a later round, the earlier prompts and responses before it) with the encoder,
//! frozen, then trains the head in Rust for each objective on the training split and scores it
//! on the test split (accuracy and F1 on the five percentile buckets, MAE in tokens, Spearman's
//! rank correlation): the paper's Table 2. With `--tune-layers K` the first objective's head
//! then trains on together with the encoder's top K layers (scored again). Writes the first
//! objective's head, and with it the tuned encoder.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use candle_core::Tensor;
use candle_nn::VarMap;
use morph_backend::EngineKind;
use morph_core::{RuntimeSpec, UnitSpec};
use morph_encoder::checkpoint::Checkpoint;
use morph_encoder::predictor::head::Scores;
use morph_encoder::predictor::{Buckets, HeadMeta, LengthHead, Objective, embed_ids, prompt_ids, stack};
use morph_encoder::predictor::{model::PROMPT_TOKENS, model::TUNED_ENCODER};
use morph_encoder::{TextTokenizer, model_pooling};
use morph_fetch::ModelFiles;

use crate::TrainConfig;
use crate::predictor::tune::TunedTop;
use crate::predictor::{
    dataset::Example, dataset::Split, dataset::load_length_records, dataset::load_lmsys,
    dataset::load_sharegpt, dataset::sharegpt_examples, dataset::split_of,
};
use crate::predictor::{score, train};

/// What a predictor training run reads, trains and writes (`morph train predictor`'s flags).
#[derive(Debug, Clone)]
pub struct PredictorRun {
    /// Prompts with output lengths in the LMSYS trace form.
    pub data: Vec<PathBuf>,
    /// Output lengths recorded by [`crate::lengths`], with `sharegpt` for the prompts' text.
    pub lengths: Option<PathBuf>,
    pub sharegpt: Option<PathBuf>,
    /// Scored on this file's test-split rounds instead.
    pub test_lengths: Option<PathBuf>,
    /// The objectives to train; the first is written to `out`.
    pub objectives: Vec<Objective>,
    /// ReLU units in the head's hidden layer (0: one linear layer).
    pub hidden: usize,
    pub epochs: usize,
    pub lr: f64,
    /// The encoder's top layers fine-tuned with the first head (0: frozen), for how many
    /// epochs, at what learning rate.
    pub tune_layers: usize,
    pub tune_epochs: usize,
    pub tune_lr: f64,
    /// Directory for the trained head (and the tuned encoder).
    pub out: Option<PathBuf>,
    /// JSONL file for the test split's predictions.
    pub predictions: Option<PathBuf>,
}

/// Trains `run`'s heads on the encoder `files` run by `engine`, prints the scores, and writes
/// what `run` asks for.
pub fn train_predictor(files: &ModelFiles, engine: &EngineKind, run: &PredictorRun) -> anyhow::Result<()> {
    let objectives = &run.objectives;
    let mut examples = Vec::new();
    for path in &run.data {
        examples.extend(load_lmsys(path)?);
    }
    let sharegpt = || -> anyhow::Result<_> {
        let path = run
            .sharegpt
            .as_ref()
            .context("--lengths and --test-lengths need --sharegpt (the prompts' text)")?;
        Ok(load_sharegpt(path)?)
    };
    if let Some(lengths) = &run.lengths {
        examples.extend(sharegpt_examples(&sharegpt()?, &load_length_records(lengths)?)?);
    }
    anyhow::ensure!(!examples.is_empty(), "no examples: give --data and/or --lengths with --sharegpt");
    // Examples from `tested_from` on are --test-lengths' rounds, scored in place of the others'.
    let tested_from = match &run.test_lengths {
        Some(lengths) => {
            let own = examples.len();
            examples.extend(sharegpt_examples(&sharegpt()?, &load_length_records(lengths)?)?);
            own
        }
        None => 0,
    };
    let tokenizer = TextTokenizer::load(&files.tokenizer)?;
    let backend = engine.load(Some((files, model_pooling(&files.dir)?)))?;
    let mut engine = backend.engine(UnitSpec::batch(RuntimeSpec::dynamic(PROMPT_TOKENS as u32, 32)))?;

    let started = Instant::now();
    let texts: Vec<&str> = examples.iter().map(|e| e.prompt.as_str()).collect();
    let ids = prompt_ids(&tokenizer, &texts)?;
    let vectors = embed_ids(engine.as_mut(), &ids, morph_core::TokenPlan::Plain)?;
    let embed_ms = started.elapsed().as_secs_f64() * 1e3;
    println!(
        "embedded {} prompts in batches of up to 32: {:.2} ms per prompt",
        examples.len(),
        embed_ms / examples.len().max(1) as f64
    );

    let pick = |split: Split| -> anyhow::Result<(Vec<usize>, Tensor, Vec<u32>)> {
        let candidates = match (split, tested_from) {
            (_, 0) => 0..examples.len(),
            (Split::Test, from) => from..examples.len(),
            (_, from) => 0..from,
        };
        let rows: Vec<usize> = candidates.filter(|&i| split_of(&examples[i].conversation) == split).collect();
        let x = stack(&rows.iter().map(|&i| vectors[i].clone()).collect::<Vec<_>>())?;
        let y = rows.iter().map(|&i| examples[i].output_len).collect();
        Ok((rows, x, y))
    };
    let (train_rows, train_x, train_y) = pick(Split::Train)?;
    let (test_rows, test_x, test_y) = pick(Split::Test)?;
    let mut table: Vec<serde_json::Value> = test_rows
        .iter()
        .map(|&i| {
            let e = &examples[i];
            serde_json::json!({"source": e.source, "conversation": e.conversation, "round": e.round, "input_len": e.input_len, "output_len": e.output_len})
        })
        .collect();
    let buckets = Buckets::from_lengths(&train_y);
    println!(
        "train {} / test {} prompts; buckets at {:?} tokens",
        train_y.len(),
        test_y.len(),
        buckets.bounds
    );
    println!(
        "{:<16} {:>10} {:>9} {:>9} {:>9} {:>11}",
        "objective", "accuracy", "F1", "MAE", "Spearman", "final loss"
    );
    let config = TrainConfig { epochs: run.epochs, lr: run.lr, ..TrainConfig::default() };
    for (k, objective) in objectives.iter().enumerate() {
        let vars = VarMap::new();
        let head = LengthHead::new(&vars, train_x.dim(1)?, run.hidden, *objective, buckets.clone())?;
        let losses = train(&vars, &head, &train_x, &train_y, &config)?;
        let predicted = head.predict(&test_x)?;
        let s = score(&buckets, &predicted, &test_y);
        let name = serde_json::to_value(objective)?.as_str().unwrap_or_default().to_string();
        report(&name, &s, &losses, &predicted, &mut table);
        if k > 0 {
            continue;
        }
        let (s, predicted, tuned) = match run.tune_layers {
            0 => (s, predicted, None),
            layers => {
                let checkpoint = Checkpoint::load(files)?;
                let top = TunedTop::new(&checkpoint, layers, model_pooling(&files.dir)?)?;
                let states = |rows: &[usize]| {
                    top.frozen_states(&rows.iter().map(|&i| ids[i].clone()).collect::<Vec<_>>())
                };
                let config =
                    TrainConfig { epochs: run.tune_epochs, lr: run.tune_lr, ..TrainConfig::default() };
                let losses = top.train(&vars, &head, &states(&train_rows)?, &train_y, &config)?;
                let predicted = top.predict(&head, &states(&test_rows)?)?;
                let s = score(&buckets, &predicted, &test_y);
                report(&format!("{name} +top {layers}"), &s, &losses, &predicted, &mut table);
                (s, predicted, Some((top, checkpoint)))
            }
        };
        print_groups(&buckets, &test_rows.iter().map(|&i| &examples[i]).collect::<Vec<_>>(), &predicted);
        let (mu, sigma) = log_ratio(&predicted, &test_y);
        println!(
            "  {name} error: ln(predicted / true) has mean {mu:.3}, std {sigma:.3} (the simulator's lognormal predictor)"
        );
        if let Some(out) = &run.out {
            std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
            vars.save(out.join("head.safetensors"))?;
            let encoder = match &tuned {
                Some((top, checkpoint)) => {
                    top.save_encoder(checkpoint, files, &out.join(TUNED_ENCODER))?;
                    let layers = match run.tune_layers {
                        1 => "layer".to_string(),
                        k => format!("{k} layers"),
                    };
                    format!("{} with its top {layers} tuned ({TUNED_ENCODER}/)", files.name)
                }
                None => files.name.clone(),
            };
            let meta = HeadMeta {
                objective: *objective,
                buckets: buckets.clone(),
                encoder,
                dim: train_x.dim(1)?,
                hidden: run.hidden,
                scores: s,
                error_mu: mu,
                error_sigma: sigma,
            };
            std::fs::write(out.join("predictor.json"), serde_json::to_string_pretty(&meta)?)?;
        }
    }
    if let Some(out) = &run.out {
        println!("wrote {}", out.display());
    }
    if let Some(path) = &run.predictions {
        let lines: Vec<String> = table.iter().map(|row| row.to_string()).collect();
        std::fs::write(path, lines.join("\n") + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
        println!("wrote the test split's predictions to {}", path.display());
    }
    Ok(())
}

/// A Table 2 row: `name`'s scores and final training loss; its predictions become the test
/// table's column `name`.
fn report(name: &str, s: &Scores, losses: &[f32], predicted: &[u32], table: &mut [serde_json::Value]) {
    println!(
        "{name:<16} {:>10.3} {:>9.3} {:>9.1} {:>9.3} {:>11.4}",
        s.accuracy,
        s.macro_f1,
        s.mae_tokens,
        s.spearman,
        losses.last().copied().unwrap_or(f32::NAN)
    );
    for (row, p) in table.iter_mut().zip(predicted) {
        row[name] = (*p).into();
    }
}

/// The first objective's scores on the test split by data source and by conversation round
/// (SSJF Fig. 9's accuracy by round).
fn print_groups(buckets: &Buckets, examples: &[&Example], predicted: &[u32]) {
    let mut groups: BTreeMap<String, (Vec<u32>, Vec<u32>)> = BTreeMap::new();
    for (e, &p) in examples.iter().zip(predicted) {
        for key in [format!("source {}", e.source), format!("round {}", e.round)] {
            let (ps, ts) = groups.entry(key).or_default();
            ps.push(p);
            ts.push(e.output_len);
        }
    }
    for (group, (ps, ts)) in groups {
        let s = score(buckets, &ps, &ts);
        println!(
            "  {group:<18} n={:<4} accuracy {:.3}  F1 {:.3}  MAE {:.1}  Spearman {:.3}",
            ts.len(),
            s.accuracy,
            s.macro_f1,
            s.mae_tokens,
            s.spearman
        );
    }
}

/// Mean and standard deviation of ln(predicted / true) (lengths below 1 counted as 1).
fn log_ratio(predicted: &[u32], truth: &[u32]) -> (f64, f64) {
    let logs: Vec<f64> = predicted
        .iter()
        .zip(truth)
        .map(|(&p, &t)| (f64::from(p.max(1)) / f64::from(t.max(1))).ln())
        .collect();
    let n = logs.len().max(1) as f64;
    let mean = logs.iter().sum::<f64>() / n;
    let var = logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt())
}
