//! The three labelled text tasks OTAS serves on one encoder (spec §6.2), with fixed splits:
//! train, profiling (a held-out fifth of the training data, spec A20) and test.
//!
//! | task | source | train / profiling | test |
//! |---|---|---|---|
//! | SST-2 | GLUE train (10,000 drawn of 67,349) | 8,000 / 2,000 | GLUE dev (872) |
//! | AG News | 6,000 rows | 3,840 / 960 | 1,200 |
//! | SMS spam | 5,430 rows | 3,475 / 869 | 1,086 |
//!
//! Texts are deduplicated first (SMS spam repeats many messages verbatim, and a text in both
//! training and profiling data would inflate the profiled accuracy), so the sizes above are upper
//! bounds. Splits are stratified by label and fixed by a seed, so every run and every plan sees
//! the same examples.

use std::collections::HashSet;
use std::path::Path;

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};

use morph_engine::EngineError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Task {
    Sst2,
    AgNews,
    SmsSpam,
}

impl Task {
    /// In task-index order (the `TaskId` a request carries).
    pub const ALL: [Task; 3] = [Task::Sst2, Task::AgNews, Task::SmsSpam];

    pub fn name(self) -> &'static str {
        match self {
            Task::Sst2 => "sst2",
            Task::AgNews => "ag_news",
            Task::SmsSpam => "sms_spam",
        }
    }

    pub fn classes(self) -> &'static [&'static str] {
        match self {
            Task::Sst2 => &["negative", "positive"],
            Task::AgNews => &["world", "sports", "business", "sci_tech"],
            Task::SmsSpam => &["ham", "spam"],
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Example {
    pub text: String,
    /// Index into [`Task::classes`].
    pub label: usize,
}

#[derive(Debug, Clone)]
pub struct TaskData {
    pub task: Task,
    pub train: Vec<Example>,
    pub profiling: Vec<Example>,
    pub test: Vec<Example>,
}

/// Examples drawn from SST-2's training set before it is split.
const SST2_DRAWN: usize = 10_000;
/// The fraction held out for testing (AG News, SMS spam) and, of the rest, for profiling.
const HELD_OUT: f64 = 0.2;
const SEED: u64 = 15;

/// Loads `task` from `dir` (the `text/` folder of the shared data) and splits it.
pub fn load(task: Task, dir: &Path) -> Result<TaskData, EngineError> {
    let mut rng = StdRng::seed_from_u64(SEED);
    let (pool, test) = match task {
        Task::Sst2 => {
            let test = unique(read_tabbed(&dir.join("sst2/dev.tsv"), true, |l| l.parse().ok())?, &[]);
            let mut train =
                unique(read_tabbed(&dir.join("sst2/train.tsv"), true, |l| l.parse().ok())?, &test);
            train.shuffle(&mut rng);
            train.truncate(SST2_DRAWN);
            (train, test)
        }
        Task::AgNews => split(unique(read_ag_news(&dir.join("ag_news/train.csv"))?, &[]), &mut rng),
        Task::SmsSpam => {
            let label = |l: &str| ["ham", "spam"].iter().position(|c| *c == l);
            let rows = read_tabbed(&dir.join("sms_spam/SMSSpamCollection"), false, label)?;
            split(unique(rows, &[]), &mut rng)
        }
    };
    let (train, profiling) = split(pool, &mut rng);
    Ok(TaskData { task, train, profiling, test })
}

/// `examples` without repeated texts (the first kept) and without any text of `exclude`.
fn unique(examples: Vec<Example>, exclude: &[Example]) -> Vec<Example> {
    let mut seen: HashSet<String> = exclude.iter().map(|e| e.text.clone()).collect();
    examples.into_iter().filter(|e| seen.insert(e.text.clone())).collect()
}

/// Splits `examples` into (kept, held out), holding out [`HELD_OUT`] of every label.
fn split(examples: Vec<Example>, rng: &mut StdRng) -> (Vec<Example>, Vec<Example>) {
    let labels = examples.iter().map(|e| e.label).max().map_or(0, |m| m + 1);
    let (mut kept, mut held) = (Vec::new(), Vec::new());
    for label in 0..labels {
        let mut of: Vec<Example> = examples.iter().filter(|e| e.label == label).cloned().collect();
        of.shuffle(rng);
        let n_held = (of.len() as f64 * HELD_OUT).round() as usize;
        held.extend(of.drain(..n_held));
        kept.extend(of);
    }
    kept.shuffle(rng);
    held.shuffle(rng);
    (kept, held)
}

/// `label<TAB>text` lines; `label` maps the first field to a class index.
fn read_tabbed(
    path: &Path,
    header: bool,
    label: impl Fn(&str) -> Option<usize>,
) -> Result<Vec<Example>, EngineError> {
    let text = read(path)?;
    let bad = |n: usize| EngineError::Load(format!("{}:{}: not LABEL<TAB>TEXT", path.display(), n + 1));
    text.lines()
        .enumerate()
        .skip(usize::from(header))
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, line)| {
            let (l, t) = line.split_once('\t').ok_or_else(|| bad(n))?;
            Ok(Example { text: t.trim().to_string(), label: label(l.trim()).ok_or_else(|| bad(n))? })
        })
        .collect()
}

/// AG News's CSV: `"class","title","description"` with classes 1–4.
fn read_ag_news(path: &Path) -> Result<Vec<Example>, EngineError> {
    let bad = |e: String| EngineError::Load(format!("{}: {e}", path.display()));
    let mut reader =
        csv::ReaderBuilder::new().has_headers(false).from_path(path).map_err(|e| bad(e.to_string()))?;
    reader
        .records()
        .map(|record| {
            let record = record.map_err(|e| bad(e.to_string()))?;
            let class: usize =
                record.get(0).and_then(|c| c.parse().ok()).ok_or_else(|| bad("class".into()))?;
            let (title, body) = (record.get(1).unwrap_or(""), record.get(2).unwrap_or(""));
            if !(1..=4).contains(&class) {
                return Err(bad(format!("class {class} outside 1–4")));
            }
            Ok(Example { text: format!("{title}. {body}"), label: class - 1 })
        })
        .collect()
}

fn read(path: &Path) -> Result<String, EngineError> {
    std::fs::read_to_string(path).map_err(|e| EngineError::Load(format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared() -> std::path::PathBuf {
        morph_assets::shared_data().join("text")
    }

    #[test]
    fn splits_are_disjoint_stratified_fifths_of_unique_texts() {
        for task in Task::ALL {
            let d = load(task, &shared()).unwrap();
            let (train, profiling) = (d.train.len() as f64, d.profiling.len() as f64);
            assert!((profiling / (train + profiling) - HELD_OUT).abs() < 0.01, "{task:?}");
            assert!(train > 3_000.0 && d.test.len() > 800, "{task:?}: {train} / {}", d.test.len());
            let mut texts = HashSet::new();
            let all = d.train.iter().chain(&d.profiling).chain(&d.test);
            assert!(all.clone().all(|e| texts.insert(e.text.as_str())), "{task:?}: a text in two splits");
            let share = |set: &[Example], label| {
                set.iter().filter(|e| e.label == label).count() as f64 / set.len() as f64
            };
            for label in 0..task.classes().len() {
                assert!(
                    (share(&d.train, label) - share(&d.profiling, label)).abs() < 0.01,
                    "{task:?} label {label}"
                );
            }
        }
        // The same seed, the same split.
        assert_eq!(
            load(Task::SmsSpam, &shared()).unwrap().test,
            load(Task::SmsSpam, &shared()).unwrap().test
        );
    }
}
