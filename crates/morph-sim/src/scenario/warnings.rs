//! What a scenario or a run must tell its reader before its numbers: work it will lose and a
//! trace that ends before the run, one line each (the CLI prints them on stderr).

use morph_core::RuntimeSpec;

use super::spec::{Row, Scenario, ScenarioError};
use crate::workload::{Arrivals, Lengths};

/// A run that leaves more than this share of its requests unserved warns.
pub const DROP_WARNING_SHARE: f64 = 0.01;

impl Row {
    /// `param=value` of the run's sweep point, `-` without a sweep.
    pub fn sweep_label(&self) -> String {
        self.sweep.map_or_else(
            || "-".into(),
            |(param, v)| {
                format!("{}={v}", serde_json::to_value(param).unwrap_or_default().as_str().unwrap_or("?"))
            },
        )
    }

    /// A line when the run left more than [`DROP_WARNING_SHARE`] of its requests unserved, in
    /// its warm-up and measured windows together, with how many and why.
    pub fn drop_warning(&self) -> Option<String> {
        let r = &self.report;
        let windows = std::iter::once(&r.measured).chain(&r.warmup);
        let (requests, dropped) = windows.clone().fold((0, 0), |(n, d), w| (n + w.requests, d + w.dropped));
        if requests == 0 || (dropped as f64) <= DROP_WARNING_SHARE * requests as f64 {
            return None;
        }
        let mut why: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
        for (kind, n) in windows.flat_map(|w| &w.dropped_by) {
            *why.entry(kind).or_default() += n;
        }
        let why: Vec<String> = why.iter().map(|(kind, n)| format!("{n} {kind}")).collect();
        let during = if r.warmup.is_some() { " (warm-up included)" } else { "" };
        Some(format!(
            "{} {} seed {}: {dropped} of {requests} requests ({:.1}%) were not served{during}: {}",
            r.policy,
            self.sweep_label(),
            self.seed,
            dropped as f64 * 100.0 / requests as f64,
            why.join(", ")
        ))
    }
}

impl Scenario {
    /// The longest input any runtime of the cluster takes, if the scenario lists runtimes.
    fn longest_runtime(&self) -> Result<Option<u32>, ScenarioError> {
        let parse = |s: &str| s.parse::<RuntimeSpec>().map_err(|e| ScenarioError::Invalid(format!("{e}")));
        let mut longest = None;
        for group in &self.cluster.runtimes {
            longest = longest.max(Some(parse(&group.runtime)?.max_len));
        }
        if let Some(p) = &self.cluster.pipeline {
            longest = longest.max(Some(parse(&p.runtime)?.max_len));
        }
        Ok(longest)
    }

    /// Warnings about the scenario itself: recorded lengths longer than every runtime (those
    /// requests will be dropped), and a trace that ends before `duration_s` at a sweep point.
    pub fn warnings(&self) -> Result<Vec<String>, ScenarioError> {
        let mut out = Vec::new();
        let lengths = match &self.workload.lengths {
            Lengths::Trace { trace } => Some(trace.input_lengths()?),
            Lengths::Empirical { values } => Some(values.clone()),
            _ => None,
        };
        if let (Some(lengths), Some(longest)) = (lengths, self.longest_runtime()?) {
            let over = lengths.iter().filter(|&&l| l > longest).count();
            if over as f64 > DROP_WARNING_SHARE * lengths.len() as f64 {
                out.push(format!(
                    "workload.lengths: {over} of {} recorded lengths ({:.0}%) exceed the longest runtime ({longest} tokens); those requests will be dropped",
                    lengths.len(),
                    over as f64 * 100.0 / lengths.len() as f64
                ));
            }
        }
        for point in self.points() {
            if let Arrivals::Trace { trace, speedup, repeat: false } = &self.workload_at(point)?.arrivals {
                let times = trace.times()?;
                let span =
                    (times.last().copied().unwrap_or(0.0) - times.first().copied().unwrap_or(0.0)) / speedup;
                if span < self.duration_s {
                    let at = point.map_or_else(String::new, |(_, v)| format!(" at rate {v}"));
                    out.push(format!(
                        "workload.arrivals: the trace{at} ends after {span:.0} s of the {} s duration (set loop = true to tile it)",
                        self.duration_s
                    ));
                }
            }
        }
        Ok(out)
    }
}
