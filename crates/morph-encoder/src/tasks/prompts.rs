//! Trained deep prompts (OTAS γ > 0): per (task, prompt plan) a `[layers, p, hidden]` tensor,
//! the prompt repository of OTAS §III-B. An encoder session per prompt plan takes every row's
//! prompts as a graph input, gathered here by the row's task, so one session serves a batch
//! that mixes tasks.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use candle_core::Device;
use morph_core::{TaskId, TokenPlan};

use morph_engine::EngineError;

/// Made by `morph train adapt` beside the heads (`--out assets/weights/tasks`).
const BUILTIN_PROMPTS: &[u8] = morph_assets::weights::TASK_PROMPTS;
/// The encoder the shipped prompts were trained on (and the heads read).
pub const BUILTIN_ENCODER: &str = "all-MiniLM-L6-v2";

#[derive(Debug, Default)]
pub struct TaskPrompts {
    /// `(task, plan)` → its prompts, flat as a batch's graph input takes them.
    prompts: HashMap<(TaskId, TokenPlan), Prompts>,
}

/// One task's prompts under one plan: `[layers, p, hidden]` values, row-major.
#[derive(Debug)]
struct Prompts {
    layers: usize,
    p: usize,
    values: Vec<f32>,
}

/// The name a prompt tensor is saved under.
pub fn prompt_name(task: &str, plan: TokenPlan) -> String {
    format!("{task}.{plan}.prompts")
}

impl TaskPrompts {
    /// The prompts shipped with Morph for [`BUILTIN_ENCODER`], loaded once.
    pub fn builtin() -> Result<Arc<Self>, EngineError> {
        static BUILTIN: OnceLock<Result<Arc<TaskPrompts>, String>> = OnceLock::new();
        BUILTIN
            .get_or_init(|| {
                let tasks = crate::tasks::served::TaskHeads::builtin().map_err(|e| e.to_string())?;
                let names: Vec<&str> = tasks.tasks().iter().map(|t| t.name.as_str()).collect();
                Self::from_saved(BUILTIN_PROMPTS, &names).map(Arc::new).map_err(|e| e.to_string())
            })
            .clone()
            .map_err(EngineError::Load)
    }

    /// Prompts saved as `{task}.{plan}.prompts` tensors; `tasks` gives each task's index.
    pub fn from_saved(bytes: &[u8], tasks: &[&str]) -> Result<Self, EngineError> {
        let tensors = candle_core::safetensors::load_buffer(bytes, &Device::Cpu)?;
        let mut prompts = HashMap::new();
        for (name, tensor) in tensors {
            let parsed = name
                .strip_suffix(".prompts")
                .and_then(|n| n.rsplit_once('.'))
                .and_then(|(t, p)| Some((tasks.iter().position(|k| *k == t)?, p.parse::<TokenPlan>().ok()?)));
            let Some((task, plan)) = parsed else {
                return Err(EngineError::Load(format!("prompts '{name}' name no served task and plan")));
            };
            let (layers, p, _) = tensor.dims3()?;
            let values = tensor.flatten_all()?.to_vec1::<f32>()?;
            prompts.insert((TaskId(task as u16), plan), Prompts { layers, p, values });
        }
        Ok(Self { prompts })
    }

    /// Task `task`'s prompts under `plan`.
    fn get(&self, task: TaskId, plan: TokenPlan) -> Result<&Prompts, EngineError> {
        self.prompts.get(&(task, plan)).ok_or_else(|| {
            EngineError::Unsupported(format!("no trained prompts for task {} under plan {plan}", task.0))
        })
    }

    /// Whether some task has prompts for `plan`.
    pub fn has_plan(&self, plan: TokenPlan) -> bool {
        self.prompts.keys().any(|(_, p)| *p == plan)
    }

    /// The prompts of each of `rows` rows laid out `[rows, layers, p, hidden]`, row-major (row
    /// r takes `tasks[r]`'s; rows past `tasks`, padding, take the first row's), with `layers`
    /// and `p`.
    pub fn gather(
        &self,
        plan: TokenPlan,
        tasks: &[TaskId],
        rows: usize,
    ) -> Result<(Vec<f32>, usize, usize), EngineError> {
        let first =
            tasks.first().ok_or_else(|| EngineError::Unsupported("a prompt plan needs tasks".into()))?;
        let shape = self.get(*first, plan)?;
        let mut out = Vec::with_capacity(rows * shape.values.len());
        for r in 0..rows {
            out.extend_from_slice(&self.get(*tasks.get(r).unwrap_or(first), plan)?.values);
        }
        Ok((out, shape.layers, shape.p))
    }
}
