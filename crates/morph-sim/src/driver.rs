//! The discrete-event driver: the same [`Policy`] objects as the live server, in virtual time.
//! Arrivals come from the pre-generated stream (merged with the event heap, in the same total
//! order), batch completions from the cost model, instances from the policy's launches after a
//! start-up delay, ticks from the policy's interval. Generations run either as a batch (the
//! batch ends with its longest output) or in a continuous batch, one iteration (one token of
//! every running sequence) at a time, sequences joining and leaving between iterations.

use std::collections::HashSet;

use morph_core::{
    Action, Event, Generation, InstanceId, InstanceInfo, Nanos, Policy, RequestId, RequestInfo, RuntimeSpec,
    Time,
};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;

use crate::cost::{CostModel, Job, Startup};
use crate::event::{EventKind, EventQueue, SimEvent};
use crate::metrics::{Recorder, Report};
use crate::workload::SimRequest;

/// How a run is measured, how instances start, and what policies are told of generations.
#[derive(Debug, Clone)]
pub struct SimOptions {
    /// Decides goodput and SLO attainment.
    pub slo: Option<Nanos>,
    /// Requests arriving before this are served but not measured.
    pub warmup: Nanos,
    pub startup: Startup,
    pub predictor: Predictor,
    /// Every generation's `max_tokens` (traces record what was generated, not the cap).
    pub max_tokens: u32,
}

impl Default for SimOptions {
    fn default() -> Self {
        Self {
            slo: None,
            warmup: 0,
            startup: Startup::default(),
            predictor: Predictor::None,
            max_tokens: 4096,
        }
    }
}

/// What a policy is told of a generation's output length before it runs.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum Predictor {
    /// Nothing: `predicted` is `None`.
    #[default]
    None,
    /// The true length (oracle SJF).
    Oracle,
    /// A predictor's error model: the true length times e^(mu + sigma·z), z standard normal,
    /// drawn per request from `seed` (`morph train predictor` measures mu and sigma, the mean
    /// and spread of ln(predicted / true) on its test split).
    LogNormal {
        mu: f64,
        sigma: f64,
        #[serde(default)]
        seed: u64,
    },
    /// What a real predictor said, replayed in request order and cycled, as a trace's lengths
    /// are: column `column` of the JSONL that `morph train predictor --predictions` writes (one
    /// column per objective), whose `output_len` column the workload's outputs must read.
    Recorded {
        path: std::path::PathBuf,
        column: String,
        /// The column's values, read when the scenario is loaded.
        #[serde(skip)]
        values: std::sync::Arc<Vec<u32>>,
    },
}

impl Predictor {
    /// The length reported for request `index` whose true output is `truth` tokens.
    pub fn predict(&self, index: u64, truth: u32) -> Option<u32> {
        match *self {
            Predictor::None => None,
            Predictor::Oracle => Some(truth),
            Predictor::Recorded { ref values, .. } => {
                (!values.is_empty()).then(|| values[(index % values.len() as u64) as usize])
            }
            Predictor::LogNormal { mu, sigma, seed } => {
                let mut rng = StdRng::seed_from_u64(seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                let z: f64 = rng.sample(StandardNormal);
                Some((f64::from(truth) * (mu + sigma * z).exp()).round().max(1.0) as u32)
            }
        }
    }

    /// How a report names it, after the policy's name.
    pub fn label(&self) -> String {
        match self {
            Predictor::None => String::new(),
            Predictor::Oracle => " (oracle)".into(),
            Predictor::LogNormal { sigma, .. } => format!(" (predicted, σ={sigma})"),
            Predictor::Recorded { column, .. } => format!(" (predicted, {column})"),
        }
    }
}

struct Instance {
    runtime: RuntimeSpec,
    /// A batch run as a unit.
    running: Vec<RequestId>,
    /// The continuous batch: sequences in the current iteration with the tokens each has left,
    /// and sequences that joined during it, for the next.
    stepping: Vec<(RequestId, u32)>,
    joining: Vec<RequestId>,
    step_pending: bool,
}

impl Instance {
    fn new(runtime: RuntimeSpec) -> Self {
        Self { runtime, running: Vec::new(), stepping: Vec::new(), joining: Vec::new(), step_pending: false }
    }

    /// Starts the next iteration with every running and joined sequence; returns its time.
    fn start_step(&mut self, cost: &dyn CostModel, requests: &[SimRequest]) -> Nanos {
        let joined = self.joining.len();
        let fresh = self.joining.drain(..).map(|r| (r, requests[r.0 as usize].output_len.max(1)));
        self.stepping.extend(fresh);
        self.step_pending = true;
        cost.step_time(self.runtime, self.stepping.len(), joined)
    }
}

/// Runs `requests` through `policy` on `cluster` (one runtime per initial instance; for a policy
/// that lays out its own, the caller passes [`Policy::layout`]), with batch times from `cost`.
/// Instances the policy launches come up after the start-up delay; retired ones free their slot
/// at once.
pub fn simulate(
    mut policy: Box<dyn Policy>,
    cluster: &[RuntimeSpec],
    cost: &dyn CostModel,
    requests: &[SimRequest],
    options: &SimOptions,
) -> Report {
    let horizon = requests.last().map_or(0, |r| r.arrival.0);
    let warmup = Time(options.warmup);
    let measured = requests.iter().filter(|r| r.arrival >= warmup).count();
    let mut rec = Recorder::new(cluster.len(), horizon, measured);
    let mut instances: Vec<Option<Instance>> =
        cluster.iter().map(|&runtime| Some(Instance::new(runtime))).collect();
    let mut loaded: HashSet<RuntimeSpec> = cluster.iter().copied().collect();
    let mut slots = cluster.len();
    rec.slots(Time::ZERO, slots);
    let mut events = EventQueue::default();
    let mut actions = Vec::new();
    for (i, &runtime) in cluster.iter().enumerate() {
        let info = InstanceInfo { id: InstanceId(i as u32), runtime };
        policy.on_event(Time::ZERO, Event::InstanceUp(info), &mut actions);
    }
    let tick = policy.tick_interval();
    if let Some(every) = tick {
        events.push(Time(every), SimEvent::Tick);
    }
    let mut next_arrival = 0;
    let mut now = Time::ZERO;
    loop {
        // The next event is the earlier of the heap's head and the next arrival, in the total
        // order (time, kind, sequence); arrivals keep their stream order.
        let heap_next = events.peek();
        let take_arrival = match (requests.get(next_arrival), heap_next) {
            (Some(r), Some((t, kind))) => (r.arrival, EventKind::Arrival) < (t, kind),
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        let mut iterated = None;
        let event = if take_arrival {
            let r = requests[next_arrival];
            next_arrival += 1;
            now = r.arrival;
            let predicted = options.predictor.predict(next_arrival as u64 - 1, r.output_len);
            Event::Arrival(RequestInfo {
                id: RequestId(next_arrival as u64 - 1),
                input_len: r.input_len,
                arrival: r.arrival,
                generation: (r.output_len > 0)
                    .then_some(Generation { max_tokens: options.max_tokens.max(r.output_len), predicted }),
            })
        } else {
            let Some((t, e)) = events.pop() else { break };
            now = t;
            match e {
                SimEvent::StepDone(id) => {
                    let Some(inst) = instances.get_mut(id.0 as usize).and_then(Option::as_mut) else {
                        continue;
                    };
                    inst.step_pending = false;
                    let mut finished = Vec::new();
                    inst.stepping.retain_mut(|(r, left)| {
                        *left -= 1;
                        if *left == 0 {
                            finished.push(*r);
                        }
                        *left > 0
                    });
                    for r in &finished {
                        let arrival = requests[r.0 as usize].arrival;
                        if arrival >= warmup {
                            rec.completed(now - arrival);
                        }
                    }
                    // The next iteration starts once the policy has filled the freed slots.
                    iterated = Some(id);
                    Event::SequencesDone { instance: id, requests: finished }
                }
                SimEvent::BatchDone(id) => {
                    let done = instances[id.0 as usize].as_mut().map(|i| std::mem::take(&mut i.running));
                    for r in done.unwrap_or_default() {
                        let arrival = requests[r.0 as usize].arrival;
                        if arrival >= warmup {
                            rec.completed(now - arrival);
                        }
                    }
                    Event::BatchDone { instance: id }
                }
                SimEvent::InstanceUp(id) => {
                    let runtime = instances[id.0 as usize].as_ref().map(|i| i.runtime);
                    let Some(runtime) = runtime else { continue };
                    Event::InstanceUp(InstanceInfo { id, runtime })
                }
                SimEvent::Tick => {
                    // Ticks stop once nothing is left to happen: no arrivals to come, nothing
                    // running and nothing waiting for a tick (a batching timeout).
                    if let Some(every) = tick
                        && (next_arrival < requests.len() || !events.is_empty() || policy.queue_len() > 0)
                    {
                        events.push(now + every, SimEvent::Tick);
                    }
                    Event::Tick
                }
            }
        };
        actions.clear();
        policy.on_event(now, event, &mut actions);
        for action in actions.drain(..) {
            match action {
                Action::Run { instance, requests: batch } => {
                    let Some(inst) = instances.get_mut(instance.0 as usize).and_then(Option::as_mut) else {
                        continue;
                    };
                    let jobs: Vec<Job> = batch
                        .iter()
                        .map(|r| requests[r.0 as usize])
                        .map(|r| Job { input_len: r.input_len, output_len: r.output_len })
                        .collect();
                    let took = cost.batch_time(inst.runtime, &jobs);
                    inst.running = batch;
                    rec.busy(instance.0 as usize, took);
                    events.push(now + took, SimEvent::BatchDone(instance));
                }
                Action::Join { instance, requests: joined } => {
                    let Some(inst) = instances.get_mut(instance.0 as usize).and_then(Option::as_mut) else {
                        continue;
                    };
                    inst.joining.extend(joined);
                    if !inst.step_pending {
                        let took = inst.start_step(cost, requests);
                        rec.busy(instance.0 as usize, took);
                        events.push(now + took, SimEvent::StepDone(instance));
                    }
                }
                Action::Reject { request, .. } => {
                    if requests[request.0 as usize].arrival >= warmup {
                        rec.dropped();
                    }
                }
                Action::Launch { runtime } => {
                    let id = InstanceId(instances.len() as u32);
                    let warm = !loaded.insert(runtime);
                    let delay = if warm { options.startup.warm } else { options.startup.cold };
                    instances.push(Some(Instance::new(runtime)));
                    events.push(now + delay, SimEvent::InstanceUp(id));
                    slots += 1;
                    rec.slots(now, slots);
                }
                Action::Retire { instance } => {
                    if let Some(slot) = instances.get_mut(instance.0 as usize)
                        && slot.take().is_some()
                    {
                        slots -= 1;
                        rec.slots(now, slots);
                    }
                }
            }
        }
        if let Some(id) = iterated
            && let Some(inst) = instances.get_mut(id.0 as usize).and_then(Option::as_mut)
            && !inst.step_pending
        {
            if inst.stepping.is_empty() && inst.joining.is_empty() {
                events.push(now, SimEvent::BatchDone(id));
            } else {
                let took = inst.start_step(cost, requests);
                rec.busy(id.0 as usize, took);
                events.push(now + took, SimEvent::StepDone(id));
            }
        }
        rec.queue(now, policy.queue_len());
    }
    rec.report(policy.as_ref(), now, warmup, options.slo)
}

#[cfg(test)]
mod tests {
    use morph_core::Profile;
    use morph_policy::{DynamicBatching, DynamicBatchingConfig};

    use super::*;
    use crate::cost::ProfileCost;

    /// `ms` per batch whatever its length and size (up to 4 rows).
    fn flat(ms: f64) -> ProfileCost {
        ProfileCost::new(
            Profile::from_points("flat", [(1, 1, ms), (1, 512, ms), (4, 1, ms), (4, 512, ms)]).unwrap(),
            1.0,
        )
    }

    fn fifo() -> Box<dyn Policy> {
        Box::new(DynamicBatching::new(DynamicBatchingConfig {
            max_batch_tokens: 1 << 30,
            max_queue: usize::MAX,
        }))
    }

    fn at(ms: &[f64]) -> Vec<SimRequest> {
        ms.iter()
            .map(|t| SimRequest { arrival: Time::from_millis_f64(*t), input_len: 10, output_len: 0 })
            .collect()
    }

    #[test]
    fn hand_computed_queueing_on_one_instance() {
        // Service 10 ms, one row per batch: arrivals at 0, 1, 2 ms finish at 10, 20, 30 ms.
        let r = simulate(
            fifo(),
            &[RuntimeSpec::dynamic(512, 1)],
            &flat(10.0),
            &at(&[0.0, 1.0, 2.0]),
            &SimOptions { slo: Some(20_000_000), ..SimOptions::default() },
        );
        assert_eq!((r.completed, r.dropped), (3, 0));
        assert_eq!(r.latencies_ms, vec![10.0, 19.0, 28.0]);
        assert!((r.slo_attainment - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(r.duration_s, 0.03);
        assert_eq!(r.mean_utilisation, 1.0);
    }

    #[test]
    fn an_idle_instance_freed_at_an_arrival_takes_it_at_once() {
        // The batch done at 10 ms comes before the arrival at 10 ms (kind order).
        let r = simulate(
            fifo(),
            &[RuntimeSpec::dynamic(512, 1)],
            &flat(10.0),
            &at(&[0.0, 10.0]),
            &SimOptions::default(),
        );
        assert_eq!(r.latencies_ms, vec![10.0, 10.0]);
    }

    #[test]
    fn dynamic_batching_batches_what_waited() {
        // Batch of up to 4: the first runs alone; the next three wait and run together.
        let r = simulate(
            fifo(),
            &[RuntimeSpec::dynamic(512, 4)],
            &flat(10.0),
            &at(&[0.0, 1.0, 2.0, 3.0]),
            &SimOptions::default(),
        );
        assert_eq!(r.latencies_ms, vec![10.0, 17.0, 18.0, 19.0]);
    }

    #[test]
    fn lognormal_predictions_are_seeded_per_request_and_spread_by_sigma() {
        let exact = Predictor::LogNormal { mu: 0.5_f64.ln(), sigma: 0.0, seed: 1 };
        assert_eq!(exact.predict(3, 100), Some(50));
        let noisy = Predictor::LogNormal { mu: 0.0, sigma: 1.0, seed: 1 };
        assert_eq!(noisy.predict(7, 100), noisy.predict(7, 100));
        let draws: Vec<f64> =
            (0..2000).map(|i| f64::from(noisy.predict(i, 1000).unwrap()).ln() - 1000f64.ln()).collect();
        let mean = draws.iter().sum::<f64>() / 2000.0;
        let std = (draws.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / 2000.0).sqrt();
        assert!(mean.abs() < 0.1 && (std - 1.0).abs() < 0.1, "mean {mean}, std {std}");
        assert_eq!(Predictor::None.predict(0, 10), None);
        assert_eq!(Predictor::Oracle.predict(0, 10), Some(10));
    }

    #[test]
    fn recorded_predictions_replay_in_request_order_cycled() {
        let values = std::sync::Arc::new(vec![5, 9]);
        let recorded = Predictor::Recorded { path: "p.jsonl".into(), column: "regression-l1".into(), values };
        let got: Vec<Option<u32>> = (0..3).map(|i| recorded.predict(i, 100)).collect();
        assert_eq!(got, vec![Some(5), Some(9), Some(5)]);
    }
}
