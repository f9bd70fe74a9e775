//! `morph train adapt`: OTAS's tasks on the shared encoder. For every token plan (the plain
//! model and each of `--plans`) it embeds the three tasks' texts under that plan, trains a
//! classification head per task where the plan pools its own features (the plain model, early
//! exits; merging reuses the plain model's heads), and measures each task's accuracy on the
//! profiling and test splits. Writes the heads (`--out`) and the profile the policy and the
//! simulator read (`--profile-out`: accuracy.json, and correctness/<task>.jsonl with one line
//! per test example: its length and whether each plan got it right). Prompt plans train their
//! prompts with their heads (`prompts.safetensors` beside the heads).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use candle_core::Tensor;
use clap::Args;
use morph_backend::Backend;
use morph_core::{PlanId, RuntimeSpec, UnitSpec};
use morph_encoder::predictor::{embed_ids, stack};
use morph_encoder::tasks::head::ClassifierHead;
use morph_encoder::token_plan::TokenPlan;
use morph_encoder::tokenize::truncate;
use morph_encoder::{Pooling, TextTokenizer};
use morph_engine::Engine;
use morph_train::TrainConfig;
use morph_train::tasks::head_train::train_head;
use morph_train::tasks::{data::Example, data::Task, data::TaskData, data::load};
use serde_json::json;

use super::adapt_prompts::{self, PromptEncoders};
use super::adapt_task::{Encoded, Measured};
use crate::engine_args::EngineArgs;
use crate::model_args::ModelArgs;

#[derive(Debug, Args)]
pub(crate) struct AdaptArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// `--plans` lists the token plans profiled besides the plain model, e.g.
    /// --plans=-104,-105,-1,-2 (exits after 4 and 5 layers, merging 1 and 2 tokens a layer).
    #[command(flatten)]
    engine: EngineArgs,
    /// The labelled text folder holding sst2/, ag_news/ and sms_spam/, e.g. ../shared/data/text.
    #[arg(long)]
    data: PathBuf,
    /// Longest input in tokens; longer texts are cut (keeping the final [SEP]).
    #[arg(long, default_value_t = 128)]
    max_len: u32,
    /// Most training epochs (training stops earlier when validation accuracy stalls).
    #[arg(long, default_value_t = 50)]
    epochs: usize,
    #[arg(long, default_value_t = 0.002)]
    lr: f64,
    /// Use at most this many examples of each split of each task (a quick run).
    #[arg(long)]
    limit: Option<usize>,
    /// Train a prompt plan's prompts on at most this many training examples per task (a tenth
    /// of them validating): backward passes through the encoder cost ~100× a head's epoch.
    #[arg(long, default_value_t = 2000)]
    prompt_examples: usize,
    /// Most epochs of a prompt plan's training (early stopping after 3 without a better
    /// validation accuracy).
    #[arg(long, default_value_t = 50)]
    prompt_epochs: usize,
    /// Train heads of their own for merging and pruning plans too, on their features (the
    /// spec's per-γ-head ablation; by default they reuse the plain model's heads).
    #[arg(long)]
    own_heads: bool,
    /// Directory for the heads: heads.safetensors and tasks.json.
    #[arg(long)]
    out: PathBuf,
    /// Directory for the profile: accuracy.json and correctness/<task>.jsonl.
    #[arg(long)]
    profile_out: Option<PathBuf>,
}

pub(crate) fn run(mut args: AdaptArgs) -> anyhow::Result<()> {
    let files = args.model.fetch()?;
    let tokenizer = TextTokenizer::load(&files.tokenizer)?;
    let pooling = Pooling::from_model_dir(&files.dir);
    let mut plans = vec![PlanId::PLAIN];
    plans.extend(args.engine.plans.iter().map(|&p| PlanId(p)).filter(|p| *p != PlanId::PLAIN));
    let prompted = |p: &i16| matches!(TokenPlan::of(PlanId(*p), usize::MAX), Ok(TokenPlan::Prompt(..)));
    // Prompt plans are trained here, on candle; ONNX Runtime runs the others.
    let prompt_encoders = if args.engine.plans.iter().any(prompted) {
        Some(PromptEncoders::load(&files, pooling)?)
    } else {
        None
    };
    args.engine.plans.retain(|p| !prompted(p));
    let backend = Backend::load(&files, pooling, &args.engine.real()?)?;
    let mut engine = backend.engine(UnitSpec::encoder(RuntimeSpec::dynamic(args.max_len, 32)))?;

    let encode = |examples: &[Example]| -> anyhow::Result<(Vec<Vec<u32>>, Vec<u32>)> {
        let rows = examples.iter().take(args.limit.unwrap_or(usize::MAX));
        let mut ids = Vec::new();
        let mut labels = Vec::new();
        for e in rows {
            let mut row = tokenizer.encode(&e.text)?;
            truncate(&mut row, args.max_len as usize);
            ids.push(row);
            labels.push(e.label as u32);
        }
        Ok((ids, labels))
    };
    let mut tasks = Vec::new();
    for task in Task::ALL {
        let TaskData { train, profiling, test, .. } = load(task, &args.data)?;
        tasks.push(Encoded {
            task,
            train: encode(&train)?,
            profiling: encode(&profiling)?,
            test: encode(&test)?,
        });
    }
    for t in &tasks {
        println!(
            "{}: train {} / profiling {} / test {}",
            t.task.name(),
            t.train.0.len(),
            t.profiling.0.len(),
            t.test.0.len()
        );
    }

    let config = TrainConfig { epochs: args.epochs, lr: args.lr, batch: 32, seed: 0 };
    let mut weights: HashMap<String, Tensor> = HashMap::new();
    // A run adding plans to heads already in `--out` keeps their plain heads (training again
    // would draw other initial weights, and the profile's merging plans were measured with them).
    let (mut plain_heads, saved) = saved_plain_heads(&args.out.join("heads.safetensors"), &tasks)?;
    let saved_plain = !plain_heads.is_empty();
    weights.extend(saved);
    // What training said of each head: kept for the heads in `--out` this run does not train.
    let mut heads_meta: BTreeMap<String, serde_json::Value> =
        std::fs::read_to_string(args.out.join("tasks.json"))
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .and_then(|meta| serde_json::from_value(meta["heads"].clone()).ok())
            .unwrap_or_default();
    let mut prompts = HashMap::new();
    let mut measured: BTreeMap<(PlanId, Task), Measured> = BTreeMap::new();
    println!("{:>6} {:<10} {:>8} {:>10} {:>8} {:>8}", "plan", "task", "epochs", "profiling", "test", "s");
    for &plan in &plans {
        let token_plan = TokenPlan::of(plan, usize::MAX)?;
        let own = if plan == PlanId::PLAIN { !saved_plain } else { token_plan.own_heads() || args.own_heads };
        for t in &tasks {
            let started = Instant::now();
            if let (TokenPlan::Prompt(p, mode), Some(encoders)) = (token_plan, &prompt_encoders) {
                let run = adapt_prompts::train_task(
                    encoders,
                    (plan, p, mode),
                    t,
                    args.prompt_examples,
                    &TrainConfig { epochs: args.prompt_epochs, ..config },
                    &mut weights,
                    &mut prompts,
                    &mut heads_meta,
                )?;
                let m = &run.measured;
                print_row(plan, t.task, run.epochs, (m.profiling, m.test), started);
                measured.insert((plan, t.task), run.measured);
                continue;
            }
            let embed = |engine: &mut dyn Engine, ids: &[Vec<u32>]| -> anyhow::Result<Tensor> {
                Ok(stack(&embed_ids(engine, ids, plan)?)?)
            };
            let profiling_x = embed(engine.as_mut(), &t.profiling.0)?;
            let test_x = embed(engine.as_mut(), &t.test.0)?;
            let mut epochs = 0;
            let trained = if own {
                // A tenth of the training split validates (early stopping), not the profiling split.
                let x = embed(engine.as_mut(), &t.train.0)?;
                let n = t.train.1.len();
                let n_val = (n / 10).max(1);
                let fit = (x.narrow(0, n_val, n - n_val)?, &t.train.1[n_val..]);
                let val = (x.narrow(0, 0, n_val)?, &t.train.1[..n_val]);
                let prefix = format!("{}.{}", t.task.name(), plan.0);
                let classes = t.task.classes().len();
                let result = train_head(&prefix, (&fit.0, fit.1), (&val.0, val.1), classes, &config)?;
                epochs = result.losses.len();
                weights.extend(result.weights);
                heads_meta.insert(prefix, json!({ "epochs": epochs, "val_accuracy": result.val_accuracy }));
                Some(result.head)
            } else {
                None
            };
            let head = match &trained {
                Some(head) => head,
                None => plain_heads.get(&t.task).context("the plain model's heads are trained first")?,
            };
            let profiling = head.accuracy(&profiling_x, &t.profiling.1)?;
            let predicted = head.predict(&test_x)?;
            let correct: Vec<bool> =
                predicted.iter().zip(&t.test.1).map(|(p, &l)| p.label == l as usize).collect();
            let test = correct.iter().filter(|&&c| c).count() as f64 / correct.len().max(1) as f64;
            print_row(plan, t.task, epochs, (profiling, test), started);
            measured.insert((plan, t.task), Measured { profiling, test, correct });
            // Merging plans reuse the plain model's heads (ToMe is training-free).
            if let (PlanId::PLAIN, Some(head)) = (plan, trained) {
                plain_heads.insert(t.task, head);
            }
        }
    }

    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    for (file, trained) in [("heads.safetensors", &mut weights), ("prompts.safetensors", &mut prompts)] {
        let path = args.out.join(file);
        keep_untrained(&path, trained)?;
        candle_core::safetensors::save(trained, path)?;
    }
    let task_list: Vec<_> =
        tasks.iter().map(|t| json!({ "name": t.task.name(), "classes": t.task.classes() })).collect();
    let meta = json!({
        "encoder": files.dir.file_name().map(|n| n.to_string_lossy().to_string()),
        "dim": engine.dim(),
        "max_len": args.max_len,
        "tasks": task_list,
        "heads": heads_meta,
        "made_by": "morph train adapt",
    });
    std::fs::write(args.out.join("tasks.json"), serde_json::to_string_pretty(&meta)? + "\n")?;
    println!("wrote {}", args.out.display());
    if let Some(dir) = &args.profile_out {
        keep_unprofiled(dir, &mut plans, &tasks, &mut measured)?;
        write_profile(dir, &plans, &tasks, &measured)?;
        println!("wrote {}", dir.display());
    }
    Ok(())
}

/// Plain heads by task, and their tensors by name.
type PlainHeads = (BTreeMap<Task, ClassifierHead>, HashMap<String, Tensor>);

/// The plain model's head of every task in the heads file at `path`, and their tensors; none if
/// it lacks one.
fn saved_plain_heads(path: &std::path::Path, tasks: &[Encoded]) -> anyhow::Result<PlainHeads> {
    let none = (BTreeMap::new(), HashMap::new());
    if !path.exists() {
        return Ok(none);
    }
    let tensors = candle_core::safetensors::load(path, &candle_core::Device::Cpu)?;
    let vb = candle_nn::VarBuilder::from_tensors(
        tensors.clone(),
        candle_core::DType::F32,
        &candle_core::Device::Cpu,
    );
    let (mut heads, mut saved) = (BTreeMap::new(), HashMap::new());
    for t in tasks {
        let prefix = format!("{}.{}", t.task.name(), PlanId::PLAIN.0);
        for part in ["weight", "bias"] {
            let name = format!("{prefix}.{part}");
            let Some(tensor) = tensors.get(&name) else { return Ok(none) };
            saved.insert(name, tensor.clone());
        }
        let dim = saved[&format!("{prefix}.weight")].dim(1)?;
        heads.insert(t.task, ClassifierHead::new(vb.pp(&prefix), dim, t.task.classes().len())?);
    }
    Ok((heads, saved))
}

/// Adds to `trained` the tensors a file already at `path` holds that this run did not train, so
/// a run with a few plans adds them to the heads and prompts already there.
fn keep_untrained(path: &std::path::Path, trained: &mut HashMap<String, Tensor>) -> anyhow::Result<()> {
    if path.exists() {
        for (name, t) in candle_core::safetensors::load(path, &candle_core::Device::Cpu)? {
            trained.entry(name).or_insert(t);
        }
    }
    Ok(())
}

/// Adds to `plans` and `measured` the plans a profile already in `dir` holds that this run did
/// not measure (same tasks, same test examples), so a run with a few plans extends it.
fn keep_unprofiled(
    dir: &std::path::Path,
    plans: &mut Vec<PlanId>,
    tasks: &[Encoded],
    measured: &mut BTreeMap<(PlanId, Task), Measured>,
) -> anyhow::Result<()> {
    let Ok(text) = std::fs::read_to_string(dir.join("accuracy.json")) else { return Ok(()) };
    let old: serde_json::Value = serde_json::from_str(&text)?;
    let names: Vec<&str> = tasks.iter().map(|t| t.task.name()).collect();
    anyhow::ensure!(old["tasks"] == json!(names), "{}: other tasks than {names:?}", dir.display());
    let old_plans: Vec<PlanId> =
        serde_json::from_value::<Vec<i16>>(old["plans"].clone())?.into_iter().map(PlanId).collect();
    let kept: Vec<(usize, PlanId)> =
        old_plans.iter().copied().enumerate().filter(|(_, p)| !plans.contains(p)).collect();
    for (k, t) in tasks.iter().enumerate() {
        let lines =
            std::fs::read_to_string(dir.join("correctness").join(format!("{}.jsonl", t.task.name())))?;
        let rows: Vec<serde_json::Value> =
            lines.lines().map(serde_json::from_str).collect::<Result<_, _>>()?;
        let same =
            rows.len() == t.test.0.len() && rows.iter().zip(&t.test.0).all(|(r, ids)| r["len"] == ids.len());
        anyhow::ensure!(same, "{}: its test examples are not this run's", dir.display());
        for &(i, plan) in &kept {
            let correct = rows.iter().map(|r| r["correct"][i] == 1).collect();
            let split = |name: &str| old[name][plan.0.to_string()][k].as_f64().unwrap_or(f64::NAN);
            measured.insert(
                (plan, t.task),
                Measured { profiling: split("profiling"), test: split("test"), correct },
            );
        }
    }
    let merged: Vec<PlanId> = old_plans.into_iter().filter(|p| kept.iter().any(|(_, k)| k == p)).collect();
    plans.splice(1..1, merged);
    Ok(())
}

/// One line of the table: a (plan, task)'s epochs, accuracies and seconds.
fn print_row(plan: PlanId, task: Task, epochs: usize, (profiling, test): (f64, f64), started: Instant) {
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "{:>6} {:<10} {:>8} {:>10.4} {:>8.4} {:>8.1}",
        plan.0,
        task.name(),
        epochs,
        profiling,
        test,
        seconds
    );
}

/// accuracy.json (by split, plan and task) and correctness/<task>.jsonl.
fn write_profile(
    dir: &std::path::Path,
    plans: &[PlanId],
    tasks: &[Encoded],
    measured: &BTreeMap<(PlanId, Task), Measured>,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir.join("correctness"))?;
    let by_split = |pick: fn(&Measured) -> f64| -> BTreeMap<String, Vec<f64>> {
        plans
            .iter()
            .map(|p| (p.0.to_string(), tasks.iter().map(|t| pick(&measured[&(*p, t.task)])).collect()))
            .collect()
    };
    let accuracy = json!({
        "plans": plans.iter().map(|p| p.0).collect::<Vec<_>>(),
        "tasks": tasks.iter().map(|t| t.task.name()).collect::<Vec<_>>(),
        "profiling": by_split(|m| m.profiling),
        "test": by_split(|m| m.test),
    });
    std::fs::write(dir.join("accuracy.json"), serde_json::to_string_pretty(&accuracy)? + "\n")?;
    for t in tasks {
        let mut lines = String::new();
        for (i, ids) in t.test.0.iter().enumerate() {
            let correct: Vec<u8> =
                plans.iter().map(|p| u8::from(measured[&(*p, t.task)].correct[i])).collect();
            lines.push_str(&json!({ "len": ids.len(), "correct": correct }).to_string());
            lines.push('\n');
        }
        std::fs::write(dir.join("correctness").join(format!("{}.jsonl", t.task.name())), lines)?;
    }
    Ok(())
}
