//! Scenario values checked when a scenario is loaded: each bad value is one line naming its
//! key, before anything runs (an infinite duration, an empty seed list or a zero instance count
//! would otherwise loop, measure nothing or be quietly coerced).

use super::spec::{Cluster, Scenario, ScenarioError};
use crate::partitions::MAX_PARTITIONS;
use crate::workload::{Arrivals, Lengths};

fn bad(key: &str, why: String) -> Result<(), ScenarioError> {
    Err(ScenarioError::Invalid(format!("{key}: {why}")))
}

/// A finite number above zero.
fn positive(key: &str, value: f64) -> Result<(), ScenarioError> {
    match value.is_finite() && value > 0.0 {
        true => Ok(()),
        false => bad(key, format!("must be a positive number, got {value}")),
    }
}

fn lengths(key: &str, lengths: &Lengths) -> Result<(), ScenarioError> {
    match *lengths {
        Lengths::Fixed { len: 0 } => bad(&format!("{key}.len"), "must be at least 1".into()),
        Lengths::Uniform { min, max } if min == 0 || min > max => {
            bad(key, format!("uniform lengths need 1 <= min <= max, got min {min}, max {max}"))
        }
        Lengths::Twitter { max: 0 } => bad(&format!("{key}.max"), "must be at least 1".into()),
        Lengths::Empirical { ref values } if values.is_empty() => {
            bad(&format!("{key}.values"), "is empty".into())
        }
        _ => Ok(()),
    }
}

fn arrivals(arrivals: &Arrivals) -> Result<(), ScenarioError> {
    match arrivals {
        Arrivals::Poisson { rate } => positive("workload.arrivals.rate", *rate),
        Arrivals::Gamma { rate, cv } => {
            positive("workload.arrivals.rate", *rate)?;
            positive("workload.arrivals.cv", *cv)
        }
        Arrivals::Mmpp { rates, dwell_s } => {
            if rates.is_empty() {
                return bad("workload.arrivals.rates", "is empty".into());
            }
            for rate in rates {
                positive("workload.arrivals.rates", *rate)?;
            }
            positive("workload.arrivals.dwell_s", *dwell_s)
        }
        Arrivals::Walk { low, high, step } => {
            positive("workload.arrivals.low", *low)?;
            positive("workload.arrivals.high", *high)?;
            if high < low || !(step.is_finite() && *step >= 0.0) {
                return bad(
                    "workload.arrivals",
                    format!("walk needs low ≤ high and step ≥ 0, got {low}, {high}, {step}"),
                );
            }
            Ok(())
        }
        Arrivals::Trace { speedup, .. } => positive("workload.arrivals.speedup", *speedup),
    }
}

fn pipeline(c: &Cluster) -> Result<(), ScenarioError> {
    if let Some(p) = &c.pipeline {
        if c.profile.is_some() || c.generation.is_some() {
            return bad(
                "cluster.pipeline",
                "replaces cluster.profile and cluster.generation; give only one".into(),
            );
        }
        if p.stage_ms.is_empty() || p.stage_ms.len() > usize::from(p.layers) {
            let why =
                format!("needs 1 to {} stages (one per layer at most), got {}", p.layers, p.stage_ms.len());
            return bad("cluster.pipeline.stage_ms", why);
        }
        for ms in &p.stage_ms {
            positive("cluster.pipeline.stage_ms", *ms)?;
        }
        if !(0.0..=1.0).contains(&p.serial_fraction) {
            return bad(
                "cluster.pipeline.serial_fraction",
                format!("must be within 0..=1, got {}", p.serial_fraction),
            );
        }
        if !(p.hop_ms.is_finite() && p.hop_ms >= 0.0 && p.model_mb.is_finite() && p.model_mb >= 0.0) {
            return bad("cluster.pipeline", "hop_ms and model_mb must be zero or more".into());
        }
    }
    if let Some(hosts) = &c.hosts {
        if hosts.count == 0 || hosts.slots == 0 {
            return bad("cluster.hosts", "needs at least one host with one slot".into());
        }
        if usize::from(hosts.count) % c.partitions != 0 {
            let why = format!(
                "{} hosts do not split into cluster.partitions = {} equal shares",
                hosts.count, c.partitions
            );
            return bad("cluster.hosts.count", why);
        }
        if let Some(mb) = hosts.cache_mb {
            positive("cluster.hosts.cache_mb", mb)?;
        }
    }
    Ok(())
}

fn partitions(s: &Scenario) -> Result<(), ScenarioError> {
    let n = s.cluster.partitions;
    if !(1..=MAX_PARTITIONS).contains(&n) {
        return bad("cluster.partitions", format!("must be 1 to {MAX_PARTITIONS} (a thread each), got {n}"));
    }
    if n > 1 && s.workload.service.is_some() {
        let why = "a service mix's utility account (OTAS) is kept for one server only: give 1".into();
        return bad("cluster.partitions", why);
    }
    Ok(())
}

/// Every value of `s` that cannot be run as written, as an error naming its key.
pub(crate) fn check(s: &Scenario) -> Result<(), ScenarioError> {
    positive("duration_s", s.duration_s)?;
    pipeline(&s.cluster)?;
    if !(s.warmup_s.is_finite() && s.warmup_s >= 0.0) {
        return bad("warmup_s", format!("must be zero or more seconds, got {}", s.warmup_s));
    }
    if s.warmup_s >= s.duration_s {
        let why =
            format!("{} s is not below duration_s {} s: nothing would be measured", s.warmup_s, s.duration_s);
        return bad("warmup_s", why);
    }
    if s.seeds.is_empty() {
        return bad("seeds", "must list at least one seed".into());
    }
    if let Some(slo) = s.slo_ms {
        positive("slo_ms", slo)?;
    }
    if s.policies.is_empty() {
        return bad("policies", "must list at least one policy".into());
    }
    arrivals(&s.workload.arrivals)?;
    lengths("workload.lengths", &s.workload.lengths)?;
    if let Some(outputs) = &s.workload.outputs {
        lengths("workload.outputs", outputs)?;
        if let Lengths::Trace { trace } = outputs
            && trace.input_column.is_none()
        {
            let why = "name the column of output lengths, e.g. input_column = \"GeneratedTokens\"";
            return bad("workload.outputs", why.into());
        }
    }
    if let Some(patience) = s.workload.patience_s {
        positive("workload.patience_s", patience)?;
    }
    partitions(s)?;
    if s.cluster.instances == Some(0) {
        return bad("cluster.instances", "must be at least 1".into());
    }
    for (i, group) in s.cluster.runtimes.iter().enumerate() {
        if group.instances == 0 {
            return bad(&format!("cluster.runtimes[{i}].instances"), "must be at least 1".into());
        }
    }
    for (key, ms) in [
        ("cluster.startup_ms", Some(s.cluster.startup_ms)),
        ("cluster.warm_startup_ms", s.cluster.warm_startup_ms),
    ] {
        if let Some(ms) = ms
            && !(ms.is_finite() && ms >= 0.0)
        {
            return bad(key, format!("must be zero or more milliseconds, got {ms}"));
        }
    }
    if let Some(sweep) = &s.sweep {
        if sweep.values.is_empty() {
            return bad("sweep.values", "is empty".into());
        }
        for v in &sweep.values {
            positive("sweep.values", *v)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
        name = "t"
        duration_s = 10
        [workload]
        arrivals = { kind = "poisson", rate = 10 }
        lengths = { kind = "fixed", len = 16 }
        [cluster]
        profile = "p.json"
        runtimes = [{ runtime = "dynamic:64x4", instances = 1 }]
        [[policies]]
        name = "dynamic-batching"
    "#;

    /// The error `GOOD` with `from` replaced by `to` gets, if any.
    fn error(from: &str, to: &str) -> Option<String> {
        let text = GOOD.replace(from, to);
        let scenario: Scenario = toml::from_str(&text).unwrap_or_else(|e| panic!("{to}: {e}"));
        check(&scenario).err().map(|e| e.to_string())
    }

    #[test]
    fn each_bad_value_is_one_line_naming_its_key() {
        assert_eq!(error("", ""), None, "the good scenario passes");
        for (from, to, says) in [
            ("duration_s = 10", "duration_s = inf", "duration_s: must be a positive number, got inf"),
            ("duration_s = 10", "duration_s = nan", "duration_s: must be a positive number, got NaN"),
            ("duration_s = 10", "duration_s = 0", "duration_s: must be a positive number, got 0"),
            (
                "duration_s = 10",
                "duration_s = 10\nwarmup_s = 10",
                "warmup_s: 10 s is not below duration_s 10 s",
            ),
            ("duration_s = 10", "duration_s = 10\nseeds = []", "seeds: must list at least one seed"),
            ("instances = 1 }", "instances = 0 }", "cluster.runtimes[0].instances: must be at least 1"),
            (
                "kind = \"fixed\", len = 16",
                "kind = \"twitter\", max = 0",
                "workload.lengths.max: must be at least 1",
            ),
            ("kind = \"fixed\", len = 16", "kind = \"uniform\", min = 9, max = 3", "need 1 <= min <= max"),
            ("rate = 10", "rate = -1", "workload.arrivals.rate: must be a positive number, got -1"),
            ("[cluster]", "patience_s = 0\n[cluster]", "workload.patience_s: must be a positive number"),
            (
                "[cluster]",
                "outputs = { kind = \"trace\", path = \"t.csv\" }\n[cluster]",
                "name the column of output lengths",
            ),
            (
                "profile = \"p.json\"",
                "profile = \"p.json\"\npipeline = { layers = 4, stage_ms = [1, 1] }",
                "cluster.pipeline: replaces cluster.profile",
            ),
            (
                "profile = \"p.json\"",
                "pipeline = { layers = 2, stage_ms = [1, 1, 1] }",
                "cluster.pipeline.stage_ms: needs 1 to 2 stages",
            ),
            (
                "profile = \"p.json\"",
                "pipeline = { layers = 4, stage_ms = [1, 1], serial_fraction = 2 }",
                "cluster.pipeline.serial_fraction: must be within 0..=1",
            ),
            (
                "profile = \"p.json\"",
                "pipeline = { layers = 4, stage_ms = [1, 0] }",
                "cluster.pipeline.stage_ms: must be a positive number, got 0",
            ),
            (
                "profile = \"p.json\"",
                "profile = \"p.json\"\nservers = { count = 0, slots = 4 }",
                "cluster.hosts",
            ),
            (
                "profile = \"p.json\"",
                "profile = \"p.json\"\npartitions = 0",
                "cluster.partitions: must be 1 to",
            ),
            (
                "profile = \"p.json\"",
                "profile = \"p.json\"\npartitions = 2\nhosts = { count = 3, slots = 4 }",
                "cluster.hosts.count: 3 hosts do not split into cluster.partitions = 2",
            ),
        ] {
            let got = error(from, to).unwrap_or_else(|| panic!("{to} was accepted"));
            assert!(got.contains(says), "{to}: {got}");
            assert_eq!(got.lines().count(), 1, "{got}");
        }
    }
}
