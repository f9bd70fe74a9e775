//! `--plan-profiles DIR`: what OTAS plans with on a live server, from the folder `morph profile
//! --dynamic --plan P --out DIR/latency_….json` and `morph train adapt --profile-out DIR` wrote:
//! each plan's latency profile (by the plan its file names) and accuracy per task on the
//! profiling split.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use morph_core::{LatencyProfile, PlanAccuracy, TokenPlan};

pub(crate) type PlanProfiles = (BTreeMap<TokenPlan, Arc<LatencyProfile>>, BTreeMap<TokenPlan, Vec<f64>>);

pub(crate) fn load(dir: &Path) -> anyhow::Result<PlanProfiles> {
    let mut latency = BTreeMap::new();
    let entries = std::fs::read_dir(dir).with_context(|| format!("--plan-profiles {}", dir.display()))?;
    for entry in entries {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name.starts_with("latency_") && name.ends_with(".json") {
            let profile = LatencyProfile::load(&path)?;
            latency.insert(profile.plan.unwrap_or_default(), Arc::new(profile));
        }
    }
    let accuracy = PlanAccuracy::load(dir)?;
    anyhow::ensure!(!latency.is_empty(), "{}: no latency_*.json profiles", dir.display());
    Ok((latency, accuracy.profiling))
}
