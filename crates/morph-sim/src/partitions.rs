//! A cluster run as separate servers behind a round-robin balancer: its instances split into
//! partitions, each with a policy of its own, the stream dealt to them in turn (request i to
//! partition i mod n). Where a request goes depends on no partition's state, so the partitions
//! need no common clock: each runs from t = 0 to its end on a thread of its own, while one more
//! draws and deals the stream. Their recordings make one report (`metrics::merge`), with the
//! whole stream's gaps and every partition's policy state.

use morph_core::{Policy, UnitSpec};
use serde_json::json;

use crate::cost::CostModel;
use crate::driver::{ModelRun, SimOptions};
use crate::metrics::{ArrivalGaps, Recorder, Report};
use crate::workload::{SimRequest, dealt_ahead};

/// The most partitions a run takes (each is a thread).
pub const MAX_PARTITIONS: usize = 256;

/// One server of a partitioned cluster: its policy, its initial instances and its options (its
/// share of the hosts).
pub struct Partition {
    pub policy: Box<dyn Policy>,
    pub cluster: Vec<UnitSpec>,
    pub options: SimOptions,
}

impl std::fmt::Debug for Partition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Partition")
            .field("policy", &self.policy.name())
            .field("cluster", &self.cluster.len())
            .finish_non_exhaustive()
    }
}

/// Runs `requests` (in arrival order) through `partitions`, dealt in turn, each as
/// [`crate::simulate`] runs one cluster; the report names the first partition's policy and,
/// of more than one, keeps each one's account of itself under `partitions`.
pub fn simulate_partitioned(
    partitions: Vec<Partition>,
    cost: &dyn CostModel,
    requests: impl Iterator<Item = SimRequest> + Send,
) -> Report {
    let n = partitions.len();
    let mut gaps = ArrivalGaps::default();
    let recordings: Vec<(Recorder, String, serde_json::Value)> = std::thread::scope(|s| {
        // One server's own recording counts the same gaps: only a split needs the dealer's.
        let stream = requests.inspect(|r| {
            if n > 1 {
                gaps.arrived(r.arrival);
            }
        });
        let shares = dealt_ahead(s, stream, n);
        let runs: Vec<_> = partitions
            .into_iter()
            .zip(shares)
            .map(|(p, share)| {
                s.spawn(move || {
                    let mut run = ModelRun::new(p.policy, &p.cluster, cost, share, &p.options, None);
                    while run.advance().is_some() {}
                    run.recording()
                })
            })
            .collect();
        runs.into_iter()
            .map(|run| run.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    });
    let policy = recordings[0].1.clone();
    let (recorders, mut states): (Vec<Recorder>, Vec<serde_json::Value>) =
        recordings.into_iter().map(|(rec, _, state)| (rec, state)).unzip();
    let state = if n == 1 { states.remove(0) } else { json!({ "partitions": states }) };
    Recorder::merged(recorders, gaps).report(policy, state)
}

#[cfg(test)]
mod tests {
    use morph_core::fixtures::linear_profile;
    use morph_core::{RuntimeSpec, Time};
    use morph_policy::{DynamicBatching, DynamicBatchingConfig};

    use super::*;
    use crate::cost::ProfileCost;
    use crate::driver::simulate;

    fn fifo() -> Box<dyn Policy> {
        Box::new(DynamicBatching::new(DynamicBatchingConfig { max_queue: usize::MAX, ..Default::default() }))
    }

    fn one_row() -> UnitSpec {
        UnitSpec::batch(RuntimeSpec::dynamic(512, 1))
    }

    /// A batch takes 0.2 ms per token: 1.6 ms for 8 tokens, about 100 ms for 512.
    fn cost() -> ProfileCost {
        ProfileCost::new(linear_profile(0.0, 0.2), 1.0)
    }

    fn options() -> SimOptions {
        SimOptions { per_request: true, slo: Some(50_000_000), ..SimOptions::default() }
    }

    /// Arrivals every ms, long and short by turns.
    fn stream(n: u64) -> Vec<SimRequest> {
        (0..n).map(|i| SimRequest::new(Time(i * 1_000_000), if i % 3 == 0 { 512 } else { 8 }, 0)).collect()
    }

    fn partitions(n: usize, instances: usize) -> Vec<Partition> {
        let cluster = vec![one_row(); instances];
        (0..n).map(|_| Partition { policy: fifo(), cluster: cluster.clone(), options: options() }).collect()
    }

    fn latencies(r: &Report) -> Vec<u64> {
        r.answers.iter().map(|a| a.as_ref().expect("answered").latency).collect()
    }

    #[test]
    fn one_partition_is_the_plain_run() {
        let plain = simulate(fifo(), &[one_row(), one_row()], &cost(), stream(40), &options());
        let partitioned = simulate_partitioned(partitions(1, 2), &cost(), stream(40).into_iter());
        assert_eq!(partitioned, plain);
    }

    #[test]
    fn partitions_are_the_runs_of_their_shares_put_together() {
        let parts = simulate_partitioned(partitions(2, 1), &cost(), stream(41).into_iter());
        let share = |k: usize| stream(41).into_iter().skip(k).step_by(2).collect::<Vec<_>>();
        let runs = [0, 1].map(|k| simulate(fifo(), &[one_row()], &cost(), share(k), &options()));
        // Request i of the stream is request i / 2 of partition i mod 2.
        let dealt: Vec<u64> = (0..41).map(|i| latencies(&runs[i % 2])[i / 2]).collect();
        assert_eq!(latencies(&parts), dealt);
        let (a, b) = (&runs[0].measured, &runs[1].measured);
        assert_eq!(parts.measured.requests, a.requests + b.requests);
        assert_eq!(parts.measured.late, a.late + b.late);
        assert_eq!(parts.measured.max_latency_ms, a.max_latency_ms.max(b.max_latency_ms));
        let seconds = runs.iter().map(|r| r.instance_seconds).sum::<f64>();
        let span = parts.duration_s;
        assert!(span >= runs[0].duration_s.max(runs[1].duration_s));
        assert!(parts.instance_seconds > seconds, "both instances are held until the later end");
        assert_eq!(parts.utilisation.len(), 2);
        assert_eq!(parts.policy_state["partitions"].as_array().map(Vec::len), Some(2));
        assert!((parts.arrival_cv).abs() < 1e-9, "the whole stream's gaps: even");
    }

    #[test]
    fn a_short_request_dealt_behind_a_long_one_waits_where_one_pool_would_not() {
        // Request 0 (long) runs on partition 0 for about 100 ms; request 2 (short, dealt to
        // partition 0 too) waits behind it, where one pool of the two instances starts it on the
        // other as soon as request 1 (short) has left it.
        let stream = || stream(6);
        let pooled = simulate(fifo(), &[one_row(), one_row()], &cost(), stream(), &options());
        let parts = simulate_partitioned(partitions(2, 1), &cost(), stream().into_iter());
        let (pooled, parts) = (latencies(&pooled), latencies(&parts));
        assert!(parts[2] > 40 * pooled[2], "{parts:?} vs {pooled:?}");
        assert_eq!(parts[..2], pooled[..2]);
    }
}
