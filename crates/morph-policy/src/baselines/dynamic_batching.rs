//! TEI-like dynamic batching: one FIFO queue; whenever an instance is idle it takes the longest
//! prefix of the queue that fits its runtime (length and rows) and a padded-token budget.
//! This is the baseline every later policy is compared with.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use morph_core::{
    Action, BatchPlan, DropReason, Event, InstanceId, InstanceInfo, Policy, RequestId, RequestInfo,
    RuntimeSpec, Time,
};
use serde_json::json;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DynamicBatchingConfig {
    /// Most padded tokens (rows × padded length) in one batch; one request always fits.
    pub max_batch_tokens: u64,
    /// Most sequences waiting; arrivals beyond it are rejected with `QueueFull`.
    pub max_queue: usize,
}

impl Default for DynamicBatchingConfig {
    fn default() -> Self {
        Self { max_batch_tokens: 16_384, max_queue: 1_024 }
    }
}

#[derive(Debug)]
pub struct DynamicBatching {
    config: DynamicBatchingConfig,
    queue: VecDeque<RequestInfo>,
    instances: BTreeMap<InstanceId, RuntimeSpec>,
    /// Idle instances, ordered by id so that the one chosen is deterministic.
    idle: BTreeSet<InstanceId>,
    longest_runtime: u32,
}

impl DynamicBatching {
    pub fn new(config: DynamicBatchingConfig) -> Self {
        let (queue, instances, idle) = (VecDeque::new(), BTreeMap::new(), BTreeSet::new());
        Self { config, queue, instances, idle, longest_runtime: 0 }
    }

    /// Takes from the head of the queue the batch that `runtime` runs next; empty if the head
    /// does not fit it.
    fn take_batch(&mut self, runtime: RuntimeSpec) -> Vec<RequestId> {
        let mut batch = Vec::new();
        let mut longest = 0;
        while let Some(head) = self.queue.front() {
            let rows = batch.len() as u32 + 1;
            let padded = runtime.padded_shape(longest.max(head.input_len), rows);
            let over_budget = !batch.is_empty() && padded.tokens() > self.config.max_batch_tokens;
            if !runtime.fits(head.input_len) || rows > runtime.max_batch || over_budget {
                break;
            }
            longest = longest.max(head.input_len);
            batch.push(head.id);
            self.queue.pop_front();
        }
        batch
    }

    fn schedule(&mut self, actions: &mut Vec<Action>) {
        if self.queue.is_empty() || self.idle.is_empty() {
            return;
        }
        let idle: Vec<InstanceId> = self.idle.iter().copied().collect();
        for instance in idle {
            if self.queue.is_empty() {
                return;
            }
            let requests = self.take_batch(self.instances[&instance]);
            if requests.is_empty() {
                continue;
            }
            self.idle.remove(&instance);
            actions.push(Action::Run { instance, requests, plan: BatchPlan::FINISH });
        }
    }

    fn admit(&mut self, request: RequestInfo, actions: &mut Vec<Action>) {
        let max_len = self.longest_runtime;
        let reason = if request.input_len > max_len {
            Some(DropReason::NoRuntimeFits { len: request.input_len, max_len })
        } else if self.queue.len() >= self.config.max_queue {
            Some(DropReason::QueueFull { capacity: self.config.max_queue })
        } else {
            None
        };
        match reason {
            Some(reason) => actions.push(Action::Drop { request: request.id, reason }),
            None => self.queue.push_back(request),
        }
    }
}

impl Policy for DynamicBatching {
    fn name(&self) -> &str {
        "dynamic-batching"
    }

    fn on_event(&mut self, _now: Time, event: Event, actions: &mut Vec<Action>) {
        match event {
            Event::InstanceUp { instance: InstanceInfo { id, unit }, .. } => {
                self.instances.insert(id, unit.runtime);
                self.idle.insert(id);
                self.longest_runtime = self.longest_runtime.max(unit.runtime.max_len);
            }
            Event::Arrival(request) => self.admit(request, actions),
            Event::Cancelled { request } => self.queue.retain(|r| r.id != request),
            Event::BatchDone { instance, .. } => {
                if self.instances.contains_key(&instance) {
                    self.idle.insert(instance);
                }
            }
            Event::Tick | Event::LaunchFailed { .. } | Event::SequencesDone { .. } => {}
        }
        self.schedule(actions);
    }

    fn queue_len(&self) -> usize {
        self.queue.len()
    }

    fn describe(&self) -> serde_json::Value {
        json!({
            "name": self.name(),
            "max_batch_tokens": self.config.max_batch_tokens,
            "max_queue": self.config.max_queue,
        })
    }
}

#[cfg(test)]
mod tests {
    use morph_core::RequestId;

    use super::*;

    fn policy(max_batch_tokens: u64, max_queue: usize, runtimes: &[RuntimeSpec]) -> DynamicBatching {
        let mut p = DynamicBatching::new(DynamicBatchingConfig { max_batch_tokens, max_queue });
        for (i, runtime) in runtimes.iter().enumerate() {
            let instance =
                InstanceInfo { id: InstanceId(i as u32), unit: morph_core::UnitSpec::encoder(*runtime) };
            p.on_event(Time::ZERO, Event::InstanceUp { instance, launch: None }, &mut Vec::new());
        }
        p
    }

    fn arrive(p: &mut DynamicBatching, id: u64, len: u32) -> Vec<Action> {
        let mut out = Vec::new();
        let info = RequestInfo {
            id: RequestId(id),
            input_len: len,
            arrival: Time(id),
            generation: None,
            service: None,
        };
        p.on_event(Time(id), Event::Arrival(info), &mut out);
        out
    }

    fn run(instance: u32, ids: &[u64]) -> Action {
        let requests = ids.iter().map(|i| RequestId(*i)).collect();
        Action::Run { instance: InstanceId(instance), requests, plan: BatchPlan::FINISH }
    }

    #[test]
    fn idle_instance_runs_the_first_arrival_at_once() {
        let mut p = policy(1000, 10, &[RuntimeSpec::dynamic(512, 8)]);
        assert_eq!(arrive(&mut p, 1, 20), vec![run(0, &[1])]);
        assert_eq!(p.queue_len(), 0);
    }

    #[test]
    fn queued_requests_batch_up_to_the_padded_token_budget() {
        let mut p = policy(100, 10, &[RuntimeSpec::dynamic(512, 8)]);
        arrive(&mut p, 1, 10); // runs alone, instance now busy
        for (id, len) in [(2, 20), (3, 30), (4, 30), (5, 10)] {
            assert!(arrive(&mut p, id, len).is_empty());
        }
        let mut out = Vec::new();
        p.on_event(
            Time(10),
            Event::BatchDone { instance: InstanceId(0), requests: vec![], failed: false },
            &mut out,
        );
        // 3 rows padded to 30 = 90 tokens fit 100; a 4th row would be 120.
        assert_eq!(out, vec![run(0, &[2, 3, 4])]);
        assert_eq!(p.queue_len(), 1);
    }

    #[test]
    fn fixed_runtime_is_limited_by_rows_and_length() {
        let mut p = policy(1_000_000, 10, &[RuntimeSpec::fixed(64, 2), RuntimeSpec::fixed(512, 2)]);
        assert_eq!(arrive(&mut p, 1, 100), vec![run(1, &[1])]);
        assert_eq!(arrive(&mut p, 2, 10), vec![run(0, &[2])]);
        assert!(arrive(&mut p, 3, 200).is_empty());
        assert!(arrive(&mut p, 4, 10).is_empty());
        // instance 0 (max_len 64) cannot take the 200-token head, so FIFO waits for instance 1
        let mut out = Vec::new();
        let done = |i| Event::BatchDone { instance: InstanceId(i), requests: vec![], failed: false };
        p.on_event(Time(5), done(0), &mut out);
        assert!(out.is_empty());
        p.on_event(Time(6), done(1), &mut out);
        assert_eq!(out, vec![run(1, &[3, 4])]);
    }

    #[test]
    fn full_queue_and_oversize_inputs_are_rejected() {
        let mut p = policy(1000, 1, &[RuntimeSpec::dynamic(128, 8)]);
        arrive(&mut p, 1, 10);
        assert!(arrive(&mut p, 2, 10).is_empty());
        assert_eq!(
            arrive(&mut p, 3, 10),
            vec![Action::Drop { request: RequestId(3), reason: DropReason::QueueFull { capacity: 1 } }]
        );
        assert_eq!(
            arrive(&mut p, 4, 129),
            vec![Action::Drop {
                request: RequestId(4),
                reason: DropReason::NoRuntimeFits { len: 129, max_len: 128 }
            }]
        );
    }
}
