//! Training OTAS's tasks on the shared encoder (`morph train adapt`). For every token plan (the plain
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
use morph_backend::EngineKind;
use morph_core::{CorrectnessLine, PlanAccuracy, RuntimeSpec, TokenPlan, UnitSpec};
use morph_encoder::predictor::{embed_ids, stack};
use morph_encoder::tasks::head::ClassifierHead;
use morph_encoder::tasks::served::{HeadTraining, TaskMeta, TasksFile};
use morph_encoder::tokenize::truncate;
use morph_encoder::{TextTokenizer, model_pooling};
use morph_engine::Engine;
use morph_fetch::ModelFiles;

use crate::TrainConfig;
use crate::tasks::head_train::train_head;
use crate::tasks::{data::Example, data::Task, data::TaskData, data::load};

use prompts::PromptEncoders;
use task::{Encoded, Measured};

mod prompts;
mod task;

/// What an adaptation run reads, trains and writes (`morph train adapt`'s flags).
#[derive(Debug, Clone)]
pub struct AdaptRun {
    /// The labelled text folder holding sst2/, ag_news/ and sms_spam/.
    pub data: PathBuf,
    /// Longest input in tokens; longer texts are cut (keeping the final [SEP]).
    pub max_len: u32,
    /// Most training epochs, and the learning rate.
    pub epochs: usize,
    pub lr: f64,
    /// At most this many examples of each split of each task.
    pub limit: Option<usize>,
    /// A prompt plan's prompts train on at most this many examples per task, for at most this
    /// many epochs.
    pub prompt_examples: usize,
    pub prompt_epochs: usize,
    /// Heads of their own for merging and pruning plans too.
    pub own_heads: bool,
    /// Directory for the heads, and for the profile.
    pub out: PathBuf,
    pub profile_out: Option<PathBuf>,
}

/// Trains and profiles `run`'s tasks on the encoder `files` under `plans` (the plain model
/// first): prompt plans train here on candle, `engine` (built for the other plans) runs the
/// rest.
pub fn train_adapt(
    files: &ModelFiles,
    engine: &EngineKind,
    plans: &[TokenPlan],
    run: &AdaptRun,
) -> anyhow::Result<()> {
    let tokenizer = TextTokenizer::load(&files.tokenizer)?;
    let pooling = model_pooling(&files.dir)?;
    let mut plans = plans.to_vec();
    let prompted = |p: &TokenPlan| matches!(p, TokenPlan::Prompt(..));
    let prompt_encoders =
        if plans.iter().any(prompted) { Some(PromptEncoders::load(files, pooling)?) } else { None };
    let backend = engine.load(Some((files, pooling)))?;
    let mut engine = backend.engine(UnitSpec::batch(RuntimeSpec::dynamic(run.max_len, 32)))?;

    let encode = |examples: &[Example]| -> anyhow::Result<(Vec<Vec<u32>>, Vec<u32>)> {
        let rows = examples.iter().take(run.limit.unwrap_or(usize::MAX));
        let mut ids = Vec::new();
        let mut labels = Vec::new();
        for e in rows {
            let mut row = tokenizer.encode(&e.text)?;
            truncate(&mut row, run.max_len as usize);
            ids.push(row);
            labels.push(e.label as u32);
        }
        Ok((ids, labels))
    };
    let mut tasks = Vec::new();
    for task in Task::ALL {
        let TaskData { train, profiling, test, .. } = load(task, &run.data)?;
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

    let config = TrainConfig { epochs: run.epochs, lr: run.lr, batch: 32, seed: 0 };
    let mut weights: HashMap<String, Tensor> = HashMap::new();
    // A run adding plans to heads already in `--out` keeps their plain heads (training again
    // would draw other initial weights, and the profile's merging plans were measured with them).
    let (mut plain_heads, saved) = saved_plain_heads(&run.out.join("heads.safetensors"), &tasks)?;
    let saved_plain = !plain_heads.is_empty();
    weights.extend(saved);
    // What training said of each head: kept for the heads in `--out` this run does not train.
    let mut heads_meta: BTreeMap<String, HeadTraining> = std::fs::read_to_string(run.out.join("tasks.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<TasksFile>(&text).ok())
        .map(|meta| meta.heads)
        .unwrap_or_default();
    let mut prompt_weights = HashMap::new();
    let mut measured: BTreeMap<(TokenPlan, Task), Measured> = BTreeMap::new();
    println!("{:>6} {:<10} {:>8} {:>10} {:>8} {:>8}", "plan", "task", "epochs", "profiling", "test", "s");
    for &plan in &plans {
        let own = if plan == TokenPlan::Plain { !saved_plain } else { plan.own_heads() || run.own_heads };
        for t in &tasks {
            let started = Instant::now();
            if let (TokenPlan::Prompt(p, mode), Some(encoders)) = (plan, &prompt_encoders) {
                let trained = prompts::train_task(
                    encoders,
                    (plan, p, mode),
                    t,
                    run.prompt_examples,
                    &TrainConfig { epochs: run.prompt_epochs, ..config },
                    &mut weights,
                    &mut prompt_weights,
                    &mut heads_meta,
                )?;
                let m = &trained.measured;
                print_row(plan, t.task, trained.epochs, (m.profiling, m.test), started);
                measured.insert((plan, t.task), trained.measured);
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
                let prefix = format!("{}.{plan}", t.task.name());
                let classes = t.task.classes().len();
                let result = train_head(&prefix, (&fit.0, fit.1), (&val.0, val.1), classes, &config)?;
                epochs = result.losses.len();
                weights.extend(result.weights);
                heads_meta.insert(
                    prefix,
                    HeadTraining {
                        epochs,
                        val_accuracy: result.val_accuracy,
                        train_examples: None,
                        losses: None,
                    },
                );
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
            if let (TokenPlan::Plain, Some(head)) = (plan, trained) {
                plain_heads.insert(t.task, head);
            }
        }
    }

    std::fs::create_dir_all(&run.out).with_context(|| format!("creating {}", run.out.display()))?;
    for (file, trained) in [("heads.safetensors", &mut weights), ("prompts.safetensors", &mut prompt_weights)]
    {
        let path = run.out.join(file);
        keep_untrained(&path, trained)?;
        candle_core::safetensors::save(trained, path)?;
    }
    let task_list = tasks
        .iter()
        .map(|t| TaskMeta {
            name: t.task.name().into(),
            classes: t.task.classes().iter().map(|c| c.to_string()).collect(),
        })
        .collect();
    let meta = TasksFile {
        // The model's name as the server names it (a local directory's name, a hub id), which
        // `morph serve --task-heads` checks the served model against.
        encoder: files.name.clone(),
        dim: engine.dim(),
        max_len: Some(run.max_len),
        tasks: task_list,
        heads: heads_meta,
        made_by: Some("morph train adapt".into()),
    };
    std::fs::write(run.out.join("tasks.json"), serde_json::to_string_pretty(&meta)? + "\n")?;
    println!("wrote {}", run.out.display());
    if let Some(dir) = &run.profile_out {
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
        let prefix = format!("{}.{}", t.task.name(), TokenPlan::Plain);
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
    plans: &mut Vec<TokenPlan>,
    tasks: &[Encoded],
    measured: &mut BTreeMap<(TokenPlan, Task), Measured>,
) -> anyhow::Result<()> {
    let Ok(old) = PlanAccuracy::load(dir) else { return Ok(()) };
    let names: Vec<&str> = tasks.iter().map(|t| t.task.name()).collect();
    anyhow::ensure!(old.tasks == names, "{}: other tasks than {names:?}", dir.display());
    let old_plans = old.plans.clone();
    let kept: Vec<(usize, TokenPlan)> =
        old_plans.iter().copied().enumerate().filter(|(_, p)| !plans.contains(p)).collect();
    for (k, t) in tasks.iter().enumerate() {
        let rows = old.load_correctness(dir, t.task.name())?;
        let same = rows.len() == t.test.0.len()
            && rows.iter().zip(&t.test.0).all(|(r, ids)| r.len as usize == ids.len());
        anyhow::ensure!(same, "{}: its test examples are not this run's", dir.display());
        for &(i, plan) in &kept {
            let correct = rows.iter().map(|r| r.correct[i] == 1).collect();
            let split = |split: &BTreeMap<TokenPlan, Vec<f64>>| {
                split.get(&plan).and_then(|a| a.get(k)).copied().unwrap_or(f64::NAN)
            };
            measured.insert(
                (plan, t.task),
                Measured { profiling: split(&old.profiling), test: split(&old.test), correct },
            );
        }
    }
    let merged: Vec<TokenPlan> = old_plans.into_iter().filter(|p| kept.iter().any(|(_, k)| k == p)).collect();
    plans.splice(1..1, merged);
    Ok(())
}

/// One line of the table: a (plan, task)'s epochs, accuracies and seconds.
fn print_row(plan: TokenPlan, task: Task, epochs: usize, (profiling, test): (f64, f64), started: Instant) {
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "{:>6} {:<10} {:>8} {:>10.4} {:>8.4} {:>8.1}",
        plan.to_string(),
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
    plans: &[TokenPlan],
    tasks: &[Encoded],
    measured: &BTreeMap<(TokenPlan, Task), Measured>,
) -> anyhow::Result<()> {
    let by_split = |pick: fn(&Measured) -> f64| -> BTreeMap<TokenPlan, Vec<f64>> {
        plans.iter().map(|p| (*p, tasks.iter().map(|t| pick(&measured[&(*p, t.task)])).collect())).collect()
    };
    std::fs::create_dir_all(dir)?;
    let accuracy = PlanAccuracy {
        plans: plans.to_vec(),
        tasks: tasks.iter().map(|t| t.task.name().to_string()).collect(),
        profiling: by_split(|m| m.profiling),
        test: by_split(|m| m.test),
    };
    accuracy.save(dir)?;
    for t in tasks {
        let lines: Vec<CorrectnessLine> = (0..t.test.0.len())
            .map(|i| CorrectnessLine {
                len: t.test.0[i].len() as u32,
                correct: plans.iter().map(|p| u8::from(measured[&(*p, t.task)].correct[i])).collect(),
            })
            .collect();
        PlanAccuracy::save_correctness(dir, t.task.name(), &lines)?;
    }
    Ok(())
}
