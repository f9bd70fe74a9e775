//! Late binding (Morph's robust Arlo, `late_binding = true`): a request waits in the queue of its
//! length bound (the shortest runtime of the set that fits it), not on an instance, and an idle
//! instance takes waiting requests it can serve. Pooled (`pooled_backlog`), it takes the oldest
//! of those its shape fits, its own class and the shorter ones alike, as DT's one queue does
//! (a fixed runtime's dynamic fallback runs the shorter classes' inputs at their own length
//! where that costs less than the padding), so no class waits longer than the rest in a burst
//! past capacity. Otherwise it takes those of its own bound first (its own class, which the
//! fewest instances can serve), then, oldest first, the shorter ones it can help with. Then,
//! with a dynamic fallback, the longer ones, oldest first. Either way nothing waits behind a
//! busy instance while another that fits is idle, so a backlog formed at the edge of capacity
//! drains at the whole fleet's rate, and nothing is bound to the longest runtime on arrival, so
//! it is never a single point of overload (the failure of binding on arrival, issue 19).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use morph_core::{InstanceId, RequestId, RequestInfo, RuntimeSpec};

#[derive(Debug, Default)]
pub(super) struct Waiting {
    /// An idle instance takes the oldest request its shape fits, its own bound's or a shorter one's.
    pooled: bool,
    /// Length bound → requests no longer than it, oldest first. Any instance whose runtime's
    /// `max_len` is at least the bound serves them, so the queues outlive a change of runtime set.
    by_bound: BTreeMap<u32, VecDeque<RequestInfo>>,
    len: usize,
    /// Idle instances that take requests, as (runtime `max_len`, id).
    idle: BTreeSet<(u32, InstanceId)>,
}

impl Waiting {
    /// Requests waiting by bound; `pooled`: taken oldest first over an instance's own bound and
    /// the shorter ones, else its own bound first.
    pub(super) fn new(pooled: bool) -> Self {
        Self { pooled, ..Self::default() }
    }

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

    /// The idle instance with the longest runtime.
    pub(super) fn idle_longest(&self) -> Option<(u32, InstanceId)> {
        self.idle.last().copied()
    }

    pub(super) fn set_idle(&mut self, max_len: u32, id: InstanceId) {
        self.idle.insert((max_len, id));
    }

    pub(super) fn set_busy(&mut self, max_len: u32, id: InstanceId) {
        self.idle.remove(&(max_len, id));
    }

    /// For an instance of `runtime`: up to its `max_batch` requests, oldest first, from one bound.
    /// Pooled, the bound whose head has waited longest of its own and the shorter ones.
    /// Otherwise its own bound (its `max_len`); if none waits there, the shorter bound whose head
    /// has waited longest. Either way, if none of those waits, the longer bound its dynamic
    /// fallback takes whose head has waited longest. Returns them with the bound they waited
    /// under.
    pub(super) fn take(&mut self, runtime: RuntimeSpec) -> Option<(u32, Vec<RequestInfo>)> {
        let own =
            || self.by_bound.get(&runtime.max_len).is_some_and(|q| !q.is_empty()).then_some(runtime.max_len);
        let longer = || {
            (runtime.fallback_len > runtime.max_len)
                .then(|| self.oldest(runtime.max_len + 1..=runtime.fallback_len))
                .flatten()
        };
        let fitting = if self.pooled {
            self.oldest(..=runtime.max_len)
        } else {
            own().or_else(|| self.oldest(..runtime.max_len))
        };
        let bound = fitting.or_else(longer)?;
        let queue = self.by_bound.get_mut(&bound)?;
        let n = queue.len().min((runtime.max_batch as usize).max(1));
        let batch: Vec<RequestInfo> = queue.drain(..n).collect();
        self.len -= batch.len();
        Some((bound, batch))
    }

    /// The bound within `bounds` whose head has waited longest.
    fn oldest(&self, bounds: impl std::ops::RangeBounds<u32>) -> Option<u32> {
        let heads = self.by_bound.range(bounds).filter_map(|(&b, q)| q.front().map(|r| (r.arrival, b)));
        heads.min().map(|(_, bound)| bound)
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

    /// Requests waiting, each as (bound, id, length, arrival).
    fn waiting(requests: &[(u32, u64, u32, u64)]) -> Waiting {
        let mut w = Waiting::default();
        for &(bound, id, len, arrival) in requests {
            w.push(bound, req(id, len, arrival));
        }
        w
    }

    fn ids(batch: Option<(u32, Vec<RequestInfo>)>) -> Vec<u64> {
        batch.map(|(_, b)| b.iter().map(|r| r.id.0).collect()).unwrap_or_default()
    }

    #[test]
    fn an_instance_takes_its_own_class_first_then_helps_and_never_takes_a_longer_one() {
        let mut w = waiting(&[(64, 1, 30, 10), (512, 2, 400, 5), (64, 3, 20, 20), (128, 4, 100, 1)]);
        // A 64-token instance serves only the 64 bound, in arrival order.
        assert_eq!(ids(w.take(RuntimeSpec::fixed(64, 1))), vec![1]);
        // A 512-token instance takes its own bound first (2), then the oldest it helps (4, at 1).
        assert_eq!(ids(w.take(RuntimeSpec::fixed(512, 1))), vec![2]);
        assert_eq!(ids(w.take(RuntimeSpec::fixed(512, 1))), vec![4]);
        assert_eq!(w.take(RuntimeSpec::fixed(128, 1)).map(|(bound, _)| bound), Some(64));
        assert_eq!((w.queued(), w.take(RuntimeSpec::fixed(512, 4))), (0, None));
    }

    #[test]
    fn among_the_bounds_it_helps_the_oldest_head_goes_first_not_the_longest() {
        let mut w = waiting(&[(256, 1, 200, 9), (64, 2, 30, 3), (128, 3, 100, 5)]);
        // A 512-token instance with none of its own waiting: 2 (at 3), 3 (at 5), then 1 (at 9).
        let order: Vec<Vec<u64>> = (0..3).map(|_| ids(w.take(RuntimeSpec::fixed(512, 1)))).collect();
        assert_eq!(order, vec![vec![2], vec![3], vec![1]]);
    }

    #[test]
    fn batches_stay_in_one_bound_oldest_first() {
        let mut w = waiting(&[(64, 1, 30, 7), (64, 2, 30, 8), (256, 3, 200, 9)]);
        assert_eq!(ids(w.take(RuntimeSpec::fixed(256, 4))), vec![3]);
        assert_eq!(ids(w.take(RuntimeSpec::fixed(256, 4))), vec![1, 2]);
    }

    #[test]
    fn a_fallback_takes_the_longest_waiting_longer_request_only_when_nothing_it_fits_waits() {
        let mut w = waiting(&[(256, 1, 200, 9), (512, 2, 400, 5), (64, 3, 30, 20)]);
        let with_fallback = RuntimeSpec::fixed(64, 1).with_fallback(512);
        assert_eq!(w.take(RuntimeSpec::fixed(64, 1)).map(|(b, _)| b), Some(64));
        assert_eq!(w.take(RuntimeSpec::fixed(64, 1)), None, "no fallback, nothing it fits");
        // The fallback takes the longer request that has waited longest (2, at 5), then 1.
        assert_eq!(ids(w.take(with_fallback)), vec![2]);
        assert_eq!(ids(w.take(with_fallback)), vec![1]);
        w.set_idle(64, InstanceId(4));
        w.set_idle(128, InstanceId(5));
        assert_eq!(w.idle_longest(), Some((128, InstanceId(5))));
    }

    #[test]
    fn pooled_an_instance_takes_the_oldest_head_its_shape_fits_then_a_longer_one() {
        let mut w = Waiting::new(true);
        for (bound, id, len, arrival) in [(128, 1, 100, 9), (64, 2, 30, 3), (512, 3, 400, 1), (96, 4, 90, 5)]
        {
            w.push(bound, req(id, len, arrival));
        }
        let with_fallback = RuntimeSpec::fixed(128, 1).with_fallback(512).with_demoted(96);
        // 2 (at 3) and 4 (at 5), shorter classes, before its own 1 (at 9); then the longer 3,
        // the oldest of all, only once nothing its shape fits waits.
        let order: Vec<Vec<u64>> = (0..4).map(|_| ids(w.take(with_fallback))).collect();
        assert_eq!(order, vec![vec![2], vec![4], vec![1], vec![3]]);
        assert_eq!(w.queued(), 0);
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
