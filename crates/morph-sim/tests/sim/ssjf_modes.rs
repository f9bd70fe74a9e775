//! SSJF's three batching modes on a toy linear cost (C = 10 ms, K = 1 ms per token at every
//! batch size up to 4), one instance, FCFS against shortest-predicted-first with oracle
//! predictions: mean JCTs computed by hand (worked out in each test's comment).

use morph_core::{RuntimeSpec, Time, UnitSpec};
use morph_policy::registry::{Context, build};
use morph_sim::cost::{ContextCost, LinearGeneration, Prefill};
use morph_sim::driver::{SimOptions, simulate};
use morph_sim::workload::{Predictor, SimRequest};
use serde_json::json;

/// (arrival ms, output tokens): a 5-token and a 30-token job at 0, then 25, 10 and 20 at 1 ms.
const JOBS: [(u64, u32); 5] = [(0, 5), (0, 30), (1, 25), (1, 10), (1, 20)];

fn mean_jct(policy: &str, batching: serde_json::Value) -> f64 {
    mean_jct_of(&JOBS, policy, batching)
}

fn mean_jct_of(jobs: &[(u64, u32)], policy: &str, batching: serde_json::Value) -> f64 {
    let cost = LinearGeneration::new(Prefill::Constant(10.0), vec![(1, 1.0), (4, 1.0)]).expect("cost");
    let requests: Vec<SimRequest> =
        jobs.iter().map(|&(ms, out)| SimRequest::new(Time(ms * 1_000_000), 16, out)).collect();
    let params = json!({ "batching": batching, "aging": null });
    let costs = Context { generation: Some(cost.costs()), ..Context::default() };
    let policy = build(policy, &params, &costs).expect("policy");
    let told = Predictor::Oracle.tell(&requests, 4096);
    let decoder = [UnitSpec::generation(RuntimeSpec::dynamic(512, 4))];
    let report = simulate(policy, &decoder, &cost, told.iter().copied(), &SimOptions::default());
    assert_eq!(report.measured.completed, jobs.len());
    report.measured.mean_latency_ms
}

fn assert_ms(got: f64, want: f64, what: &str) {
    assert!((got - want).abs() < 1e-9, "{what}: mean JCT {got} ms, hand-computed {want} ms");
}

/// One at a time, C + K·N each. FCFS: 5 ends 15, 30 ends 55, 25 ends 90, 10 ends 110, 20 ends
/// 140 → JCTs 15, 55, 89, 109, 139. SJF: the other four wait when the 5 ends at 15, so 10 ends
/// 35, 20 ends 65, 25 ends 100, 30 ends 140 → 15, 34, 64, 99, 140.
#[test]
fn no_batching() {
    assert_ms(mean_jct("fcfs", json!({"mode": "none"})), (15.0 + 55.0 + 89.0 + 109.0 + 139.0) / 5.0, "FCFS");
    assert_ms(mean_jct("ssjf", json!({"mode": "none"})), (15.0 + 34.0 + 64.0 + 99.0 + 140.0) / 5.0, "SJF");
}

/// Batches of 2 formed when 2 wait (or after 20 ms); a batch takes C + K·(longest) and each
/// sequence is answered when its own output ends (C + K·N after the batch starts). [5, 30] at 0:
/// the 5 ends at 15, the batch at 40. FCFS: [25, 10] from 40: the 10 ends 60, the 25 at 75;
/// [20] (waited past 20 ms) ends 105 → 15, 40, 74, 59, 104. SJF: [10, 20] from 40: 60 and 70;
/// [25] ends 105 → 15, 40, 104, 59, 69.
#[test]
fn dynamic_batching() {
    let batching = json!({"mode": "dynamic", "max_batch": 2, "wait_ms": 20.0});
    assert_ms(mean_jct("fcfs", batching.clone()), (15.0 + 40.0 + 74.0 + 59.0 + 104.0) / 5.0, "FCFS");
    assert_ms(mean_jct("ssjf", batching), (15.0 + 40.0 + 104.0 + 59.0 + 69.0) / 5.0, "SJF");
}

/// A request alone waits the full 20 ms for a partner (checked on ticks every 2 ms), then runs:
/// 20 + 10 + 5 = 35 ms. The last request of a run is not left behind when events run out.
#[test]
fn dynamic_batching_runs_a_lone_request_after_the_wait() {
    let batching = json!({"mode": "dynamic", "max_batch": 2, "wait_ms": 20.0});
    assert_ms(mean_jct_of(&[(0, 5)], "fcfs", batching), 35.0, "lone request");
}

/// Two slots, iterations of K = 1 ms, plus C when a sequence joins. The 5 runs alone 0–11, the
/// 30 joins for 11–22, then 1 ms steps: the 5 ends at 25. FCFS: the 25 joins (25–36), ends at
/// 60; the 10 joins (60–71), the 30 ends at 71; the 20 joins (71–82); the 10 ends at 90, the
/// 20 at 101 → 25, 71, 59, 89, 100. SJF: the 10 joins at 25, ends 45; the 20 joins (45–56);
/// the 30 ends 71; the 25 joins (71–82); the 20 ends 85, the 25 at 106 → 25, 71, 105, 44, 84.
#[test]
fn continuous_batching() {
    let batching = json!({"mode": "continuous", "max_batch": 2});
    assert_ms(mean_jct("fcfs", batching.clone()), (25.0 + 71.0 + 59.0 + 89.0 + 100.0) / 5.0, "FCFS");
    assert_ms(mean_jct("ssjf", batching), (25.0 + 71.0 + 105.0 + 44.0 + 84.0) / 5.0, "SJF");
}

/// Chunked prefill (the decoder's `--prefill-chunk`): C(t) = t ms, K = 1 ms. A (10-token
/// prompt, 3 tokens) starts alone at 0: 1 + 10 → its first token at 11. B (400-token prompt,
/// 1 token) arrives at 5 and joins at 11.
/// - Whole prompts: 1 + 400 → 412, A's second token and B's only one (B's JCT 407); A's third
///   at 413. Mean (413 + 407) / 2 = 410.
/// - Chunks of 100, each priced C(before + 100) − C(before) = 100: A's tokens at 112 and 213
///   (JCT 213) while B feeds; B alone feeds 300–400 by 415 and samples then (JCT 410). Mean
///   (213 + 410) / 2 = 311.5.
#[test]
fn chunked_prefill_lets_running_sequences_go_on_between_a_long_prompts_chunks() {
    let jct = |chunk: u32| {
        let prefill = Prefill::ByTokens(vec![(1, 1.0), (1000, 1000.0)]);
        let cost = LinearGeneration::new(prefill, vec![(1, 1.0), (4, 1.0)]).expect("cost");
        let requests = [SimRequest::new(Time(0), 10, 3), SimRequest::new(Time(5_000_000), 400, 1)];
        let params = json!({ "batching": {"mode": "continuous", "max_batch": 2}, "aging": null });
        let policy = build("fcfs", &params, &Context::default()).expect("policy");
        let told = Predictor::Oracle.tell(&requests, 4096);
        let decoder = [UnitSpec::generation(RuntimeSpec::dynamic(512, 4))];
        let options = SimOptions { prefill_chunk: chunk, ..SimOptions::default() };
        let report = simulate(policy, &decoder, &cost, told.iter().copied(), &options);
        assert_eq!(report.measured.completed, 2);
        report.measured.mean_latency_ms
    };
    assert_ms(jct(0), 410.0, "whole prompts");
    assert_ms(jct(100), 311.5, "chunks of 100");
}

/// A decode step's context priced (0.01 ms per cached token past 100 per sequence; C = 10 ms,
/// K = 1 ms). Continuous batch of 2: A (100-token prompt, 3 tokens) and B (300, 2) both at 0.
/// A starts alone: C + K = 11, its first token. B joins: C + K(2) = 11, plus A's step at 101
/// tokens, 1 past 100: 0.01 → 22.01, A's second token and B's first. Both decode at 102 + 301
/// tokens, 203 past 2 × 100: 1 + 2.03 → 25.04, the last of each. Without the context term: 23.
#[test]
fn decode_steps_pay_for_the_tokens_their_sequences_hold() {
    let jct = |ms_per_token: f64| {
        let context = ContextCost { measured_at: 100, ms_per_token };
        let cost = LinearGeneration::new(Prefill::Constant(10.0), vec![(1, 1.0), (4, 1.0)])
            .and_then(|c| c.with_context(context))
            .expect("cost");
        let requests = [SimRequest::new(Time(0), 100, 3), SimRequest::new(Time(0), 300, 2)];
        let params = json!({ "batching": {"mode": "continuous", "max_batch": 2}, "aging": null });
        let policy = build("fcfs", &params, &Context::default()).expect("policy");
        let told = Predictor::Oracle.tell(&requests, 4096);
        let decoder = [UnitSpec::generation(RuntimeSpec::dynamic(512, 4))];
        let report = simulate(policy, &decoder, &cost, told.iter().copied(), &SimOptions::default());
        assert_eq!(report.measured.completed, 2);
        report.measured.mean_latency_ms
    };
    assert_ms(jct(0.0), 23.0, "the paper's K(b) alone");
    assert_ms(jct(0.01), 25.04, "with the context priced");
}
