//! Instances with their own FIFO queues: a request is bound to an instance when it arrives
//! (Arlo dispatches on arrival) and waits there; an idle instance runs the head of its queue,
//! up to its runtime's batch size.

use std::collections::{BTreeMap, VecDeque};

use morph_core::{InstanceId, RequestId, RequestInfo, RuntimeSpec};

#[derive(Debug)]
pub(super) struct Instance {
    pub(super) runtime: RuntimeSpec,
    pub(super) queue: VecDeque<RequestInfo>,
    pub(super) running: Vec<RequestInfo>,
    /// Takes no new requests; retired once empty.
    pub(super) draining: bool,
}

impl Instance {
    /// Requests bound to this instance: queued plus running.
    pub(super) fn outstanding(&self) -> usize {
        self.queue.len() + self.running.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.queue.is_empty() && self.running.is_empty()
    }
}

/// Every instance the policy knows, by id (ordered, so iteration is deterministic).
#[derive(Debug, Default)]
pub(super) struct Instances {
    pub(super) map: BTreeMap<InstanceId, Instance>,
    queued: usize,
}

impl Instances {
    pub(super) fn add(&mut self, id: InstanceId, runtime: RuntimeSpec) {
        let instance = Instance { runtime, queue: VecDeque::new(), running: Vec::new(), draining: false };
        self.map.insert(id, instance);
    }

    pub(super) fn remove(&mut self, id: InstanceId) {
        if let Some(i) = self.map.remove(&id) {
            debug_assert!(i.is_empty(), "instance {id} retired with requests bound to it");
        }
    }

    /// Requests waiting on any instance, not yet started.
    pub(super) fn queued(&self) -> usize {
        self.queued
    }

    pub(super) fn enqueue(&mut self, id: InstanceId, request: RequestInfo) {
        if let Some(i) = self.map.get_mut(&id) {
            i.queue.push_back(request);
            self.queued += 1;
        }
    }

    /// Starts the next batch on `id` if it is idle and has work: up to `max_batch` requests from
    /// the head of its queue.
    pub(super) fn start_next(&mut self, id: InstanceId) -> Option<Vec<RequestId>> {
        let i = self.map.get_mut(&id)?;
        if !i.running.is_empty() || i.queue.is_empty() {
            return None;
        }
        let n = i.queue.len().min(i.runtime.max_batch as usize);
        i.running.extend(i.queue.drain(..n));
        self.queued -= n;
        Some(i.running.iter().map(|r| r.id).collect())
    }

    /// Takes a queued request out of whichever queue holds it; the instance that held it.
    pub(super) fn unqueue(&mut self, request: RequestId) -> Option<InstanceId> {
        let (id, instance) = self.map.iter_mut().find(|(_, i)| i.queue.iter().any(|r| r.id == request))?;
        instance.queue.retain(|r| r.id != request);
        self.queued -= 1;
        Some(*id)
    }

    /// The batch on `id` finished: the requests it ran.
    pub(super) fn finish(&mut self, id: InstanceId) -> Vec<RequestInfo> {
        self.map.get_mut(&id).map(|i| std::mem::take(&mut i.running)).unwrap_or_default()
    }

    /// Instances that take new requests.
    pub(super) fn serving(&self) -> impl Iterator<Item = (InstanceId, &Instance)> {
        self.map.iter().filter(|(_, i)| !i.draining).map(|(id, i)| (*id, i))
    }
}

#[cfg(test)]
mod tests {
    use morph_core::Time;
    use morph_core::fixtures::request;

    use super::*;

    fn req(id: u64) -> RequestInfo {
        request(id, 10, Time(id))
    }

    #[test]
    fn runs_its_own_queue_in_order_one_batch_at_a_time() {
        let mut fleet = Instances::default();
        fleet.add(InstanceId(0), RuntimeSpec::fixed(64, 2));
        for id in 0..3 {
            fleet.enqueue(InstanceId(0), req(id));
        }
        assert_eq!(fleet.start_next(InstanceId(0)), Some(vec![RequestId(0), RequestId(1)]));
        assert_eq!(fleet.start_next(InstanceId(0)), None, "busy");
        assert_eq!((fleet.queued(), fleet.map[&InstanceId(0)].outstanding()), (1, 3));
        assert_eq!(fleet.finish(InstanceId(0)).len(), 2);
        assert_eq!(fleet.start_next(InstanceId(0)), Some(vec![RequestId(2)]));
        assert_eq!(fleet.queued(), 0);
        fleet.enqueue(InstanceId(0), req(3));
        assert_eq!(fleet.unqueue(RequestId(3)), Some(InstanceId(0)));
        assert_eq!((fleet.unqueue(RequestId(3)), fleet.queued()), (None, 0));
    }
}
