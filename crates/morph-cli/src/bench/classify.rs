//! `morph bench --endpoint classify --scenario FILE --data DIR`: OTAS live. The scenario's
//! request stream (its query types: task, SLO, utility, and the profiled test example each
//! request stands for) is sent to `POST /v1/classify` with that example's text, so the answers
//! can be scored as the simulator scores the same stream: utility earned (u_r for a correct
//! answer within its SLO) and the outcome types 1–4.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use morph_sim::workload::SimRequest;
use morph_train::tasks::{data::Task, data::load};
use serde::Serialize;
use serde_json::{Value, json};

/// What a request's answer is scored against.
#[derive(Debug, Clone)]
pub(super) struct Expected {
    label: String,
    slo_ms: f64,
    utility: f64,
}

/// The utility account of one live run.
#[derive(Debug, Serialize)]
pub(super) struct ClassifyReport {
    pub utility: f64,
    pub attainable: f64,
    /// Shares: 1 correct within the SLO, 2 wrong within it, 3 answered late, 4 refused or
    /// evicted (504) or failed.
    pub types: [f64; 4],
    /// Answers per token plan, by the plan's name in the answer (`exit:1`).
    pub plans: BTreeMap<String, usize>,
}

/// The bodies of `requests` (a scenario's stream with query types) for `/v1/classify`, with
/// what each answer should be; texts are the profiled test examples, from `data`.
pub(super) fn bodies(
    requests: &[SimRequest],
    task_names: &[String],
    data: &Path,
) -> anyhow::Result<(Vec<Value>, Vec<Expected>)> {
    let mut tests = Vec::new();
    for name in task_names {
        let task =
            Task::ALL.into_iter().find(|t| t.name() == name).with_context(|| format!("task '{name}'"))?;
        tests.push((task, load(task, data)?.test));
    }
    let mut bodies = Vec::with_capacity(requests.len());
    let mut expected = Vec::with_capacity(requests.len());
    for r in requests {
        let service = r.service.context("--endpoint classify needs a scenario with workload.service")?;
        let (task, examples) = &tests[usize::from(service.task.0)];
        let example = examples.get(r.example as usize).context("an example beyond the test split")?;
        let slo_ms =
            service.deadline.map_or(f64::INFINITY, |d| d.as_millis_f64() - r.arrival.as_millis_f64());
        let utility = f64::from(service.utility_micros) / 1e6;
        let body = json!({ "task": task.name(), "input": example.text, "slo_ms": slo_ms, "utility": utility, "truncate": true });
        bodies.push(body);
        expected.push(Expected { label: task.classes()[example.label].to_string(), slo_ms, utility });
    }
    Ok((bodies, expected))
}

/// Scores each request's answer (by stream index).
pub(super) fn score(expected: &[Expected], answers: &[super::Outcome]) -> ClassifyReport {
    let (mut utility, mut counts, mut plans) = (0.0, [0usize; 4], BTreeMap::new());
    for (want, outcome) in expected.iter().zip(answers) {
        let answer = outcome.body.as_ref().map(|b| &b["data"][0]);
        let kind = match (outcome.status, answer) {
            (Ok(200), Some(a)) => {
                let plan = a["plan"].as_str().map_or_else(|| a["plan"].to_string(), String::from);
                *plans.entry(plan).or_insert(0) += 1;
                match (outcome.latency_ms < want.slo_ms, a["label"].as_str() == Some(want.label.as_str())) {
                    (true, true) => 0,
                    (true, false) => 1,
                    (false, _) => 2,
                }
            }
            _ => 3,
        };
        counts[kind] += 1;
        if kind == 0 {
            utility += want.utility;
        }
    }
    let total = counts.iter().sum::<usize>().max(1) as f64;
    ClassifyReport {
        utility,
        attainable: expected.iter().map(|e| e.utility).sum(),
        types: counts.map(|c| c as f64 / total),
        plans,
    }
}
