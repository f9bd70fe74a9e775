//! The task heads Morph serves: one linear head per (task, plan) over all-MiniLM-L6-v2's pooled,
//! normalised vector, as `morph train adapt --out assets/weights/tasks` wrote them. A plan
//! without heads of its own (token merging) reads the plain model's.

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use morph_core::PlanId;
use serde::Deserialize;

use super::head::{ClassifierHead, Prediction};
use crate::pooling::l2_normalize;
use morph_engine::EngineError;

/// Made by `morph train adapt --data ../shared/data/text --plans=-101,-102,-103,-104,-105,-1,-2,-3,-4
/// --out assets/weights/tasks --profile-out assets/profiles/otas`.
const BUILTIN_WEIGHTS: &[u8] = morph_assets::weights::TASK_HEADS;
const BUILTIN_META: &str = morph_assets::weights::TASKS;

#[derive(Debug, Deserialize)]
struct Meta {
    encoder: String,
    dim: usize,
    tasks: Vec<TaskMeta>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct TaskMeta {
    pub name: String,
    pub classes: Vec<String>,
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
    heads: HashMap<(usize, PlanId), ClassifierHead>,
}

impl TaskHeads {
    /// The heads shipped with Morph.
    pub fn builtin() -> Result<Self, EngineError> {
        Self::from_saved(BUILTIN_WEIGHTS, BUILTIN_META)
    }

    pub fn from_saved(weights: &[u8], meta: &str) -> Result<Self, EngineError> {
        let meta: Meta =
            serde_json::from_str(meta).map_err(|e| EngineError::Load(format!("tasks.json: {e}")))?;
        let tensors = candle_core::safetensors::load_buffer(weights, &Device::Cpu)?;
        let vb = VarBuilder::from_tensors(tensors.clone(), DType::F32, &Device::Cpu);
        let mut heads = HashMap::new();
        for name in tensors.keys().filter_map(|k| k.strip_suffix(".weight")) {
            let (task, plan) =
                name.rsplit_once('.').ok_or_else(|| EngineError::Load(format!("head '{name}'")))?;
            let index = meta.tasks.iter().position(|t| t.name == task);
            let (Some(index), Ok(plan)) = (index, plan.parse::<i16>()) else {
                return Err(EngineError::Load(format!("head '{name}' names no served task and plan")));
            };
            let head = ClassifierHead::new(vb.pp(name), meta.dim, meta.tasks[index].classes.len())?;
            heads.insert((index, PlanId(plan)), head);
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
    pub fn classify(&self, task: usize, plan: PlanId, vector: &[f32]) -> Result<Classified, EngineError> {
        let head =
            self.heads.get(&(task, plan)).or_else(|| self.heads.get(&(task, PlanId::PLAIN))).ok_or_else(
                || EngineError::Unsupported(format!("no head for task {task} under plan {}", plan.0)),
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
            let plain = heads.classify(task, PlanId::PLAIN, &v).unwrap();
            // ToMe (−2) has no heads of its own: the plain model's answer the same vector.
            assert_eq!(heads.classify(task, PlanId(-2), &v).unwrap(), plain);
            let total: f32 = plain.scores.iter().map(|(_, s)| s).sum();
            assert!((total - 1.0).abs() < 1e-4);
        }
        assert_eq!(heads.find("ag_news"), Some(1));
        assert!(heads.find("imdb").is_none());
    }
}
