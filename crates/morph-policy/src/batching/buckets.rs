//! The waiting requests of one queue, split by input length into buckets so that a batch holds
//! sequences of similar length: a 12-token sentence never pads up to a 200-token article.
//! Each bucket is a FIFO; the next batch comes from the bucket whose head has waited longest,
//! so every batch that starts holds the oldest request of some bucket and none waits behind
//! an unbounded stream of others (no starvation). With no buckets it is one FIFO (TEI-like).

use std::collections::VecDeque;

use morph_core::{RequestId, RequestInfo, RuntimeSpec};

/// Inputs of up to `max_len` tokens (and over the previous bucket's bound), batched at most
/// `max_rows` at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Bucket {
    pub max_len: u32,
    pub max_rows: u32,
}

#[derive(Debug)]
pub(crate) struct BucketQueue {
    /// Ascending bounds; inputs past the last bound go to one more bucket of unlimited rows.
    bounds: Vec<Bucket>,
    /// One FIFO per bound, plus the one past them.
    queues: Vec<VecDeque<RequestInfo>>,
    len: usize,
}

impl BucketQueue {
    /// `bounds` must ascend by `max_len` (checked where the config is read).
    pub(crate) fn new(bounds: &[Bucket]) -> Self {
        Self { bounds: bounds.to_vec(), queues: vec![VecDeque::new(); bounds.len() + 1], len: 0 }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn bucket_of(&self, input_len: u32) -> usize {
        self.bounds.partition_point(|b| b.max_len < input_len)
    }

    fn max_rows(&self, bucket: usize) -> u32 {
        self.bounds.get(bucket).map_or(u32::MAX, |b| b.max_rows)
    }

    pub(crate) fn push_back(&mut self, request: RequestInfo) {
        let b = self.bucket_of(request.input_len);
        self.queues[b].push_back(request);
        self.len += 1;
    }

    /// Back to the front of its bucket (a retried request keeps its turn).
    pub(crate) fn push_front(&mut self, request: RequestInfo) {
        let b = self.bucket_of(request.input_len);
        self.queues[b].push_front(request);
        self.len += 1;
    }

    pub(crate) fn remove(&mut self, request: RequestId) {
        for queue in &mut self.queues {
            queue.retain(|r| r.id != request);
        }
        self.len = self.queues.iter().map(VecDeque::len).sum();
    }

    /// Every waiting request, oldest arrival first (as [`Self::take_batch`] would reach them).
    pub(crate) fn drain_by_arrival(&mut self) -> Vec<RequestInfo> {
        let mut waiting: Vec<RequestInfo> = self.queues.iter_mut().flat_map(|q| q.drain(..)).collect();
        waiting.sort_by_key(|r| (r.arrival, r.id));
        self.len = 0;
        waiting
    }

    /// Takes the batch `runtime` runs next: from the bucket whose head (among those `runtime`
    /// fits) arrived first, the longest FIFO prefix within the bucket's rows, the runtime's rows
    /// and `max_tokens` padded tokens (one request always fits), into `batch` (empty when
    /// called; it stays empty if no head fits), their ids onto `ids`. Returns the longest input
    /// taken (0: none): the caller needs no read of `batch`, whose list has often left the
    /// cache since the instance's last batch (at tens of thousands of instances).
    pub(crate) fn take_batch(
        &mut self,
        runtime: RuntimeSpec,
        max_tokens: u64,
        batch: &mut Vec<RequestInfo>,
        ids: &mut Vec<RequestId>,
    ) -> u32 {
        let oldest = (0..self.queues.len())
            .filter_map(|b| self.queues[b].front().map(|head| (b, head)))
            .filter(|(_, head)| runtime.fits(head.input_len))
            .min_by_key(|(_, head)| (head.arrival, head.id))
            .map(|(b, _)| b);
        let Some(bucket) = oldest else { return 0 };
        let max_rows = self.max_rows(bucket).min(runtime.max_batch);
        let queue = &mut self.queues[bucket];
        debug_assert!(batch.is_empty());
        let mut longest = 0;
        while let Some(head) = queue.front() {
            let rows = batch.len() as u32 + 1;
            let padded = runtime.padded_shape(longest.max(head.input_len), rows);
            let over_budget = !batch.is_empty() && padded.tokens() > max_tokens;
            if !runtime.fits(head.input_len) || rows > max_rows || over_budget {
                break;
            }
            longest = longest.max(head.input_len);
            ids.push(head.id);
            batch.extend(queue.pop_front());
        }
        self.len -= batch.len();
        longest
    }
}

#[cfg(test)]
mod tests {
    use morph_core::Time;

    use super::*;

    fn request(id: u64, input_len: u32) -> RequestInfo {
        morph_core::fixtures::request(id, input_len, Time(id))
    }

    /// The ids of the batch `runtime` takes next (the ids listed and the longest input
    /// returned agree with the batch).
    fn taken(q: &mut BucketQueue, runtime: RuntimeSpec, max_tokens: u64) -> Vec<u64> {
        let (mut batch, mut ids) = (Vec::new(), vec![RequestId(99)]);
        let longest = q.take_batch(runtime, max_tokens, &mut batch, &mut ids);
        assert_eq!(longest, batch.iter().map(|r| r.input_len).max().unwrap_or(0));
        assert_eq!(ids[1..], batch.iter().map(|r| r.id).collect::<Vec<_>>(), "appended after what was there");
        batch.iter().map(|r| r.id.0).collect()
    }

    const BUCKETS: [Bucket; 2] = [Bucket { max_len: 16, max_rows: 4 }, Bucket { max_len: 64, max_rows: 2 }];

    #[test]
    fn a_batch_holds_one_bucket_and_starts_from_the_oldest_head() {
        let mut q = BucketQueue::new(&BUCKETS);
        for (id, len) in [(1, 60), (2, 10), (3, 12), (4, 50), (5, 16), (6, 17), (7, 300)] {
            q.push_back(request(id, len));
        }
        let rt = RuntimeSpec::dynamic(512, 32);
        // The oldest head is 1 (17..=64 tokens), two rows at most there.
        assert_eq!(taken(&mut q, rt, 1 << 20), [1, 4]);
        assert_eq!(taken(&mut q, rt, 1 << 20), [2, 3, 5]);
        assert_eq!(taken(&mut q, rt, 1 << 20), [6]);
        assert_eq!(taken(&mut q, rt, 1 << 20), [7], "past the last bound: its own bucket");
        assert!(q.is_empty());
    }

    #[test]
    fn a_runtime_takes_the_oldest_head_it_fits_and_the_token_budget_holds() {
        let mut q = BucketQueue::new(&BUCKETS);
        for (id, len) in [(1, 60), (2, 10), (3, 12), (4, 8)] {
            q.push_back(request(id, len));
        }
        assert_eq!(taken(&mut q, RuntimeSpec::fixed(32, 8), 1 << 20), [2, 3, 4]);
        q.push_back(request(5, 10));
        q.push_back(request(6, 10));
        // 2 rows padded to 10 fit 20 padded tokens; the 60-token head does not fit 32 tokens.
        assert_eq!(taken(&mut q, RuntimeSpec::dynamic(32, 8), 20), [5, 6]);
        assert_eq!(q.len(), 1);
        assert!(taken(&mut q, RuntimeSpec::dynamic(32, 8), 20).is_empty());
    }

    #[test]
    fn removed_and_retried_requests_keep_the_count_and_the_turn() {
        let mut q = BucketQueue::new(&BUCKETS);
        for (id, len) in [(1, 10), (2, 10), (3, 40)] {
            q.push_back(request(id, len));
        }
        q.remove(RequestId(2));
        q.push_front(request(0, 40));
        assert_eq!(q.len(), 3);
        assert_eq!(taken(&mut q, RuntimeSpec::dynamic(64, 8), 1 << 20), [0, 3]);
        assert_eq!(taken(&mut q, RuntimeSpec::dynamic(64, 8), 1 << 20), [1]);
    }
}
