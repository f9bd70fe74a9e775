//! `--plan-profiles DIR`: what OTAS plans with on a live server, from the folder `morph profile
//! --dynamic --plan P --out DIR/latency_….json` and `morph train adapt --profile-out DIR` wrote:
//! each plan's latency profile (by the plan its file names) and accuracy per task on the
//! profiling split.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use morph_core::{LatencyProfile, PlanId};

pub(crate) type PlanProfiles = (BTreeMap<PlanId, Arc<LatencyProfile>>, BTreeMap<PlanId, Vec<f64>>);

pub(crate) fn load(dir: &Path) -> anyhow::Result<PlanProfiles> {
    let mut latency = BTreeMap::new();
    let entries = std::fs::read_dir(dir).with_context(|| format!("--plan-profiles {}", dir.display()))?;
    for entry in entries {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name.starts_with("latency_") && name.ends_with(".json") {
            let profile = LatencyProfile::load(&path)?;
            latency.insert(PlanId(profile.plan.unwrap_or(0)), Arc::new(profile));
        }
    }
    let path = dir.join("accuracy.json");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let file: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{}", path.display()))?;
    let profiling: BTreeMap<i16, Vec<f64>> =
        serde_json::from_value(file["profiling"].clone()).with_context(|| {
            format!("{}: \"profiling\" maps each plan to its accuracy per task", path.display())
        })?;
    anyhow::ensure!(!latency.is_empty(), "{}: no latency_*.json profiles", dir.display());
    Ok((latency, profiling.into_iter().map(|(p, a)| (PlanId(p), a)).collect()))
}
