//! What a token plan costs in accuracy, per task, as `morph train adapt --profile-out DIR`
//! writes it and the live server (`--plan-profiles DIR`) and the simulator (a scenario's
//! `workload.service.profile`) read it: `DIR/accuracy.json`, and `DIR/correctness/TASK.jsonl`
//! with one line per test example.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::token_plan::TokenPlan;

/// `accuracy.json`: every task's accuracy under every plan, on the profiling split (what a
/// policy plans with) and on the test split.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanAccuracy {
    /// The plans, in the order each correctness line lists them.
    pub plans: Vec<TokenPlan>,
    /// The tasks, in the order each accuracy list gives them.
    pub tasks: Vec<String>,
    pub profiling: BTreeMap<TokenPlan, Vec<f64>>,
    #[serde(default)]
    pub test: BTreeMap<TokenPlan, Vec<f64>>,
}

/// One line of `correctness/TASK.jsonl`: a test example's token length, and whether each plan
/// (in [`PlanAccuracy::plans`] order) classified it correctly (1) or not (0).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorrectnessLine {
    pub len: u32,
    pub correct: Vec<u8>,
}

/// Reading or writing a plan-accuracy folder failed; the message names the file.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct AccuracyFileError {
    pub path: String,
    pub message: String,
}

impl AccuracyFileError {
    fn at(path: &Path, message: impl ToString) -> Self {
        Self { path: path.display().to_string(), message: message.to_string() }
    }
}

impl PlanAccuracy {
    /// `dir/accuracy.json`.
    pub fn load(dir: &Path) -> Result<Self, AccuracyFileError> {
        let path = dir.join("accuracy.json");
        let text = std::fs::read_to_string(&path).map_err(|e| AccuracyFileError::at(&path, e))?;
        serde_json::from_str(&text).map_err(|e| AccuracyFileError::at(&path, e))
    }

    /// Writes `dir/accuracy.json`.
    pub fn save(&self, dir: &Path) -> Result<(), AccuracyFileError> {
        let path = dir.join("accuracy.json");
        let text = serde_json::to_string_pretty(self).map_err(|e| AccuracyFileError::at(&path, e))? + "\n";
        std::fs::write(&path, text).map_err(|e| AccuracyFileError::at(&path, e))
    }

    /// The lines of `dir/correctness/TASK.jsonl`, each checked to list every plan.
    pub fn load_correctness(
        &self,
        dir: &Path,
        task: &str,
    ) -> Result<Vec<CorrectnessLine>, AccuracyFileError> {
        let path = dir.join("correctness").join(format!("{task}.jsonl"));
        let text = std::fs::read_to_string(&path).map_err(|e| AccuracyFileError::at(&path, e))?;
        let line = |l: &str| {
            let line: CorrectnessLine =
                serde_json::from_str(l).map_err(|e| AccuracyFileError::at(&path, e))?;
            if line.correct.len() != self.plans.len() {
                let why =
                    format!("a line has {} plans, accuracy.json {}", line.correct.len(), self.plans.len());
                return Err(AccuracyFileError::at(&path, why));
            }
            Ok(line)
        };
        text.lines().filter(|l| !l.trim().is_empty()).map(line).collect()
    }

    /// Writes `dir/correctness/TASK.jsonl`.
    pub fn save_correctness(
        dir: &Path,
        task: &str,
        lines: &[CorrectnessLine],
    ) -> Result<(), AccuracyFileError> {
        let folder = dir.join("correctness");
        std::fs::create_dir_all(&folder).map_err(|e| AccuracyFileError::at(&folder, e))?;
        let path = folder.join(format!("{task}.jsonl"));
        let mut text = String::new();
        for line in lines {
            text += &serde_json::to_string(line).map_err(|e| AccuracyFileError::at(&path, e))?;
            text.push('\n');
        }
        std::fs::write(&path, text).map_err(|e| AccuracyFileError::at(&path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_folder_reads_back_and_a_short_line_is_refused() {
        let dir = std::env::temp_dir().join(format!("morph-plan-accuracy-{}", std::process::id()));
        let plans = vec![TokenPlan::Plain, TokenPlan::Exit(1)];
        let accuracy = PlanAccuracy {
            plans: plans.clone(),
            tasks: vec!["sst2".into()],
            profiling: plans.iter().map(|p| (*p, vec![0.9])).collect(),
            test: plans.iter().map(|p| (*p, vec![0.8])).collect(),
        };
        std::fs::create_dir_all(&dir).unwrap();
        accuracy.save(&dir).unwrap();
        assert!(std::fs::read_to_string(dir.join("accuracy.json")).unwrap().contains("\"exit:1\""));
        assert_eq!(PlanAccuracy::load(&dir).unwrap(), accuracy);
        let lines = [CorrectnessLine { len: 7, correct: vec![1, 0] }];
        PlanAccuracy::save_correctness(&dir, "sst2", &lines).unwrap();
        assert_eq!(accuracy.load_correctness(&dir, "sst2").unwrap(), lines);
        PlanAccuracy::save_correctness(&dir, "sst2", &[CorrectnessLine { len: 7, correct: vec![1] }])
            .unwrap();
        let err = accuracy.load_correctness(&dir, "sst2").unwrap_err().to_string();
        assert!(err.contains("a line has 1 plans, accuracy.json 2"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
