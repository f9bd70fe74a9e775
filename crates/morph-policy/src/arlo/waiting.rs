//! Late binding (Morph's robust Arlo, `late_binding = true`): a request waits in the queue of its
//! length bound (the shortest runtime of the set that fits it), not on an instance, and an idle
//! instance takes waiting requests it can serve: those of the longest bound it fits first (its
//! own class, which the fewest instances can serve), then, oldest first, the shorter ones it can
//! help with. Nothing waits behind a busy instance while another that fits is idle, so a backlog
//! formed at the edge of capacity drains at the whole fleet's rate; the longest runtime takes
//! demoted work only when it is idle, so it is never a single point of overload (the failure of
//! binding on arrival, issue 19); and a small class of long inputs never waits behind the short
//! ones its instances help with (a tail the mean-optimal allocation does not see).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use morph_core::{InstanceId, RequestId, RequestInfo};

#[derive(Debug, Default)]
pub(super) struct Waiting {
    /// Length bound → requests no longer than it, oldest first. Any instance whose runtime's
    /// `max_len` is at least the bound serves them, so the queues outlive a change of runtime set.
    by_bound: BTreeMap<u32, VecDeque<RequestInfo>>,
    len: usize,
    /// Idle instances that take requests, as (runtime `max_len`, id).
    idle: BTreeSet<(u32, InstanceId)>,
}

impl Waiting {
    /// Requests waiting, not bound to any instance yet.
    pub(super) fn queued(&self) -> usize {
        self.len
    }

    pub(super) fn push(&mut self, bound: u32, request: RequestInfo) {
        self.by_bound.entry(bound).or_default().push_back(request);
        self.len += 1;
    }

    /// The idle instance with the shortest runtime that fits `len` tokens (least padding).
    pub(super) fn idle_fitting(&self, len: u32) -> Option<(u32, InstanceId)> {
        self.idle.range((len, InstanceId(0))..).next().copied()
    }

    pub(super) fn set_idle(&mut self, max_len: u32, id: InstanceId) {
        self.idle.insert((max_len, id));
    }

    pub(super) fn set_busy(&mut self, max_len: u32, id: InstanceId) {
        self.idle.remove(&(max_len, id));
    }

    /// For an instance whose runtime serves up to `max_len` tokens: up to `max_batch` requests,
    /// oldest first, from the longest non-empty bound it serves. Returns them with the bound
    /// they waited under.
    pub(super) fn take(&mut self, max_len: u32, max_batch: usize) -> Option<(u32, Vec<RequestInfo>)> {
        let (&bound, queue) = self.by_bound.range_mut(..=max_len).rev().find(|(_, q)| !q.is_empty())?;
        let n = queue.len().min(max_batch.max(1));
        let batch: Vec<RequestInfo> = queue.drain(..n).collect();
        self.len -= batch.len();
        Some((bound, batch))
    }

    /// Takes a waiting request out (its client left); whether it was waiting here.
    pub(super) fn unqueue(&mut self, request: RequestId) -> bool {
        for queue in self.by_bound.values_mut() {
            if let Some(at) = queue.iter().position(|r| r.id == request) {
                queue.remove(at);
                self.len -= 1;
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use morph_core::Time;
    use morph_core::fixtures::request;

    use super::*;

    fn req(id: u64, len: u32, arrival: u64) -> RequestInfo {
        request(id, len, Time(arrival))
    }

    fn ids(batch: Option<(u32, Vec<RequestInfo>)>) -> Vec<u64> {
        batch.map(|(_, b)| b.iter().map(|r| r.id.0).collect()).unwrap_or_default()
    }

    #[test]
    fn an_instance_takes_its_own_class_first_then_helps_and_never_takes_a_longer_one() {
        let mut w = Waiting::default();
        w.push(64, req(1, 30, 10));
        w.push(512, req(2, 400, 5));
        w.push(64, req(3, 20, 20));
        w.push(128, req(4, 100, 1));
        // A 64-token instance serves only the 64 bound, in arrival order.
        assert_eq!(ids(w.take(64, 1)), vec![1]);
        // A 512-token instance takes its own bound first (2), then the longest it helps (4).
        assert_eq!(ids(w.take(512, 1)), vec![2]);
        assert_eq!(ids(w.take(512, 1)), vec![4]);
        assert_eq!(w.take(128, 1).map(|(bound, _)| bound), Some(64));
        assert_eq!((w.queued(), w.take(512, 4)), (0, None));
    }

    #[test]
    fn batches_stay_in_one_bound_oldest_first() {
        let mut w = Waiting::default();
        w.push(64, req(1, 30, 7));
        w.push(64, req(2, 30, 8));
        w.push(256, req(3, 200, 9));
        assert_eq!(ids(w.take(256, 4)), vec![3]);
        assert_eq!(ids(w.take(256, 4)), vec![1, 2]);
    }

    #[test]
    fn idle_instances_are_found_by_the_shortest_fitting_runtime() {
        let mut w = Waiting::default();
        w.set_idle(512, InstanceId(0));
        w.set_idle(64, InstanceId(1));
        w.set_idle(128, InstanceId(2));
        assert_eq!(w.idle_fitting(50), Some((64, InstanceId(1))));
        assert_eq!(w.idle_fitting(65), Some((128, InstanceId(2))));
        w.set_busy(128, InstanceId(2));
        assert_eq!(w.idle_fitting(65), Some((512, InstanceId(0))));
        assert_eq!(w.idle_fitting(513), None);
        w.push(64, req(9, 10, 0));
        assert!(w.unqueue(RequestId(9)) && !w.unqueue(RequestId(9)));
        assert_eq!(w.queued(), 0);
    }
}
