//! The task heads Morph serves: one linear head per (task, plan) over an encoder's pooled,
//! normalised vector, as `morph train adapt --out DIR` wrote them: built in, those of
//! `--out assets/weights/tasks` on all-MiniLM-L6-v2; else a user's (`morph serve --task-heads
//! DIR`). A plan without heads of its own (token merging) reads the plain model's.

use std::collections::{BTreeMap, HashMap};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use morph_core::TokenPlan;
use serde::{Deserialize, Serialize};

use super::head::{ClassifierHead, Prediction};
use crate::pooling::l2_normalize;
use morph_engine::EngineError;

/// Made by `morph train adapt --data ../shared/data/text --plans exit:1,exit:2,exit:3,exit:4,exit:5,merge:1,merge:2,merge:3,merge:4
/// --out assets/weights/tasks --profile-out assets/profiles/otas`.
const BUILTIN_WEIGHTS: &[u8] = morph_assets::weights::TASK_HEADS;
const BUILTIN_META: &str = morph_assets::weights::TASKS;

/// `tasks.json` beside the heads: what `morph train adapt` wrote and the server reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TasksFile {
    /// The encoder whose pooled, normalised vectors the heads read.
    pub encoder: String,
    pub dim: usize,
    /// The longest input (tokens) training and profiling used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_len: Option<u32>,
    pub tasks: Vec<TaskMeta>,
    /// What training said of each head, by tensor prefix (`TASK.PLAN`).
    #[serde(default)]
    pub heads: BTreeMap<String, HeadTraining>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub made_by: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskMeta {
    pub name: String,
    pub classes: Vec<String>,
}

/// How one head's training went: the epochs run and the validation accuracy kept; a prompt
/// plan's also its training examples and each epoch's loss.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeadTraining {
    pub epochs: usize,
    pub val_accuracy: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub train_examples: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub losses: Option<Vec<f32>>,
}

/// A task's answer to one input.
#[derive(Debug, Clone, PartialEq)]
pub struct Classified {
    pub label: String,
    /// Softmax score per class, in the task's class order.
    pub scores: Vec<(String, f32)>,
}

#[derive(Debug)]
pub struct TaskHeads {
    encoder: String,
    tasks: Vec<TaskMeta>,
    heads: HashMap<(usize, TokenPlan), ClassifierHead>,
}

impl TaskHeads {
    /// The heads shipped with Morph.
    pub fn builtin() -> Result<Self, EngineError> {
        Self::from_saved(BUILTIN_WEIGHTS, BUILTIN_META)
    }

    /// The heads `morph train adapt --out DIR` wrote: `DIR/heads.safetensors` and `DIR/tasks.json`.
    pub fn from_dir(dir: &std::path::Path) -> Result<Self, EngineError> {
        let failed =
            |file: &str, e: std::io::Error| EngineError::Load(format!("{}: {e}", dir.join(file).display()));
        let meta = std::fs::read_to_string(dir.join("tasks.json")).map_err(|e| failed("tasks.json", e))?;
        let weights =
            std::fs::read(dir.join("heads.safetensors")).map_err(|e| failed("heads.safetensors", e))?;
        Self::from_saved(&weights, &meta)
    }

    pub fn from_saved(weights: &[u8], meta: &str) -> Result<Self, EngineError> {
        let meta: TasksFile =
            serde_json::from_str(meta).map_err(|e| EngineError::Load(format!("tasks.json: {e}")))?;
        let tensors = candle_core::safetensors::load_buffer(weights, &Device::Cpu)?;
        let vb = VarBuilder::from_tensors(tensors.clone(), DType::F32, &Device::Cpu);
        let mut heads = HashMap::new();
        for name in tensors.keys().filter_map(|k| k.strip_suffix(".weight")) {
            let (task, plan) =
                name.rsplit_once('.').ok_or_else(|| EngineError::Load(format!("head '{name}'")))?;
            let index = meta.tasks.iter().position(|t| t.name == task);
            let (Some(index), Ok(plan)) = (index, plan.parse::<TokenPlan>()) else {
                return Err(EngineError::Load(format!("head '{name}' names no served task and plan")));
            };
            let head = ClassifierHead::new(vb.pp(name), meta.dim, meta.tasks[index].classes.len())?;
            heads.insert((index, plan), head);
        }
        Ok(Self { encoder: meta.encoder, tasks: meta.tasks, heads })
    }

    /// The encoder whose vectors the heads read (a model directory's name).
    pub fn encoder(&self) -> &str {
        &self.encoder
    }

    pub fn tasks(&self) -> &[TaskMeta] {
        &self.tasks
    }

    /// The index of task `name` (the `TaskId` its requests carry).
    pub fn find(&self, name: &str) -> Option<usize> {
        self.tasks.iter().position(|t| t.name == name)
    }

    /// Task `task`'s answer for a pooled `vector` computed under `plan`.
    pub fn classify(&self, task: usize, plan: TokenPlan, vector: &[f32]) -> Result<Classified, EngineError> {
        let head =
            self.heads.get(&(task, plan)).or_else(|| self.heads.get(&(task, TokenPlan::Plain))).ok_or_else(
                || EngineError::Unsupported(format!("no head for task {task} under plan {plan}")),
            )?;
        let mut v = vector.to_vec();
        l2_normalize(&mut v);
        let x = Tensor::from_vec(v, (1, vector.len()), &Device::Cpu)?;
        let Prediction { label, scores } = head.predict(&x)?.remove(0);
        let classes = &self.tasks[task].classes;
        Ok(Classified {
            label: classes[label].clone(),
            scores: classes.iter().cloned().zip(scores).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_heads_load_for_every_task_and_fall_back_to_the_plain_head() {
        let heads = TaskHeads::builtin().unwrap();
        assert_eq!(heads.encoder(), "all-MiniLM-L6-v2");
        let names: Vec<&str> = heads.tasks().iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["sst2", "ag_news", "sms_spam"]);
        let v = vec![0.05f32; 384];
        for task in 0..3 {
            let plain = heads.classify(task, TokenPlan::Plain, &v).unwrap();
            // ToMe (−2) has no heads of its own: the plain model's answer the same vector.
            assert_eq!(heads.classify(task, TokenPlan::Merge(2), &v).unwrap(), plain);
            let total: f32 = plain.scores.iter().map(|(_, s)| s).sum();
            assert!((total - 1.0).abs() < 1e-4);
        }
        assert_eq!(heads.find("ag_news"), Some(1));
        assert!(heads.find("imdb").is_none());
    }

    /// The integer a file written before plans had names keyed `plan` by.
    fn legacy_id(plan: TokenPlan) -> i16 {
        let n = |k: usize| k as i16;
        let id = match plan {
            TokenPlan::Plain => 0,
            TokenPlan::Merge(r) => -n(r),
            TokenPlan::Exit(k) => -(100 + n(k)),
            TokenPlan::Prune { after, percent } => -(1000 + 100 * n(after) + i16::from(percent)),
            TokenPlan::Prompt(p, morph_core::PromptMode::Additive) => n(p),
            TokenPlan::Prompt(p, morph_core::PromptMode::Replace) => 100 + n(p),
        };
        assert_eq!(TokenPlan::from_legacy_id(id), Ok(plan));
        id
    }

    /// `weights` with every tensor's plan renamed to its old numeric key (`sst2.exit:1.weight`
    /// becomes `sst2.-101.weight`), as a safetensors buffer.
    fn with_numeric_keys(weights: &[u8]) -> Vec<u8> {
        let tensors = candle_core::safetensors::load_buffer(weights, &Device::Cpu).unwrap();
        let renamed: HashMap<String, Tensor> = tensors
            .into_iter()
            .map(|(name, t)| {
                let parts: Vec<&str> = name.split('.').collect();
                let plan: TokenPlan = parts[1].parse().unwrap();
                (format!("{}.{}.{}", parts[0], legacy_id(plan), parts[2]), t)
            })
            .collect();
        let path =
            std::env::temp_dir().join(format!("morph-numeric-keys-{}.safetensors", std::process::id()));
        candle_core::safetensors::save(&renamed, &path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        bytes
    }

    #[test]
    fn heads_and_prompts_keyed_by_old_numeric_plans_serve_the_same_answers() {
        let heads = TaskHeads::builtin().unwrap();
        let old = TaskHeads::from_saved(&with_numeric_keys(BUILTIN_WEIGHTS), BUILTIN_META).unwrap();
        let plans: Vec<TokenPlan> = heads.heads.keys().map(|(_, p)| *p).collect();
        assert!(plans.contains(&TokenPlan::Exit(1)) && plans.contains(&TokenPlan::Plain), "{plans:?}");
        let v: Vec<f32> = (0..384).map(|i| ((i * 37) % 11) as f32 / 11.0 - 0.5).collect();
        for (task, plan) in heads.heads.keys() {
            assert_eq!(old.classify(*task, *plan, &v).unwrap(), heads.classify(*task, *plan, &v).unwrap());
        }
        let names: Vec<&str> = heads.tasks().iter().map(|t| t.name.as_str()).collect();
        let prompts = crate::tasks::prompts::TaskPrompts::builtin().unwrap();
        let old = crate::tasks::prompts::TaskPrompts::from_saved(
            &with_numeric_keys(morph_assets::weights::TASK_PROMPTS),
            &names,
        )
        .unwrap();
        let tasks = [morph_core::TaskId(0), morph_core::TaskId(2)];
        for plan in [
            TokenPlan::Prompt(2, morph_core::PromptMode::Additive),
            TokenPlan::Prompt(2, morph_core::PromptMode::Replace),
        ] {
            assert_eq!(
                old.gather(plan, &tasks, 3).unwrap(),
                prompts.gather(plan, &tasks, 3).unwrap(),
                "{plan}"
            );
        }
    }
}
