//! SSJF's waiting queue (§3.2): shortest predicted job first (or arrival order, FCFS), with
//! aging against starvation (§6): a request that has waited more than `factor` times its
//! predicted execution time (job length × `token_ms`) is promoted ahead of the order, promoted
//! requests by how overdue they are. A job's length is its predicted output plus the prefill it
//! still needs after the prompt cache, weighed in output tokens ([`job_length`]): a
//! conversation's next round, whose earlier rounds are cached, is short and goes early; a long
//! uncached prompt is long, and its aging bound grows with it, so it waits longer but never
//! starves.

use morph_core::time::Millis;
use std::collections::{BTreeSet, HashMap};

use morph_core::{RequestId, RequestInfo, Time, time::ms_to_nanos};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// First come, first served.
    Fcfs,
    /// Shortest predicted output first (speculative shortest job first).
    Sjf,
}

/// Aging: promote a request after it has waited `factor` × (predicted tokens × `token_ms`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Aging {
    pub factor: f64,
    /// Estimated execution time per output token, ms.
    pub token_ms: Millis,
}

type Key = (u32, Time, RequestId);

#[derive(Debug, Clone)]
pub struct JobQueue {
    order: Order,
    aging: Option<Aging>,
    /// An uncached prompt token's weight in output tokens.
    prefill_weight: f64,
    by_key: BTreeSet<Key>,
    by_arrival: BTreeSet<(Time, RequestId)>,
    by_promotion: BTreeSet<(Time, RequestId)>,
    /// Each queued request's key, promotion time and prompt length.
    entries: HashMap<RequestId, (Key, Option<Time>, u32)>,
}

/// The length a request is scheduled by, in output tokens: its predicted output (at most its
/// `max_tokens`; else its `max_tokens`) plus its prompt tokens the prompt cache does not hold,
/// each `prefill_weight` of an output token; an encoder request: its input length.
pub fn job_length(r: &RequestInfo, prefill_weight: f64) -> u32 {
    let Some(g) = r.generation else { return r.input_len };
    let output = g.predicted.map_or(g.max_tokens, |p| p.min(g.max_tokens));
    let prefill = f64::from(r.input_len.saturating_sub(g.cached)) * prefill_weight;
    output.saturating_add(prefill.round() as u32)
}

impl JobQueue {
    /// A queue in `order`, weighing an uncached prompt token as `prefill_weight` output tokens;
    /// aging applies to SJF only (FCFS cannot starve anyone).
    pub fn new(order: Order, aging: Option<Aging>, prefill_weight: f64) -> Self {
        Self {
            order,
            aging: aging.filter(|_| order == Order::Sjf),
            prefill_weight,
            by_key: BTreeSet::new(),
            by_arrival: BTreeSet::new(),
            by_promotion: BTreeSet::new(),
            entries: HashMap::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn push(&mut self, r: &RequestInfo) {
        let length = job_length(r, self.prefill_weight);
        let primary = match self.order {
            Order::Fcfs => 0,
            Order::Sjf => length,
        };
        let key = (primary, r.arrival, r.id);
        let promote_at =
            self.aging.map(|a| r.arrival + ms_to_nanos(a.factor * a.token_ms.0 * f64::from(length.max(1))));
        self.by_key.insert(key);
        self.by_arrival.insert((r.arrival, r.id));
        if let Some(t) = promote_at {
            self.by_promotion.insert((t, r.id));
        }
        self.entries.insert(r.id, (key, promote_at, r.input_len));
    }

    /// The request to run next at `now` (the most overdue promoted one, else the first in
    /// order), with its prompt's length.
    pub fn pop(&mut self, now: Time) -> Option<(RequestId, u32)> {
        let promoted = self.by_promotion.first().filter(|(t, _)| *t <= now).map(|(_, id)| *id);
        let id = promoted.or_else(|| self.by_key.first().map(|k| k.2))?;
        let prompt = self.entries.get(&id)?.2;
        self.remove(id).then_some((id, prompt))
    }

    /// Takes `id` out of the queue; whether it was there.
    pub fn remove(&mut self, id: RequestId) -> bool {
        let Some((key, promote_at, _)) = self.entries.remove(&id) else { return false };
        self.by_key.remove(&key);
        self.by_arrival.remove(&(key.1, id));
        if let Some(t) = promote_at {
            self.by_promotion.remove(&(t, id));
        }
        true
    }

    /// When the longest-waiting request arrived.
    pub fn oldest_arrival(&self) -> Option<Time> {
        self.by_arrival.first().map(|(t, _)| *t)
    }
}

#[cfg(test)]
mod tests {
    use morph_core::Generation;
    use morph_core::fixtures::request;

    use super::*;

    fn req(id: u64, arrival_ms: u64, predicted: u32) -> RequestInfo {
        let generation = Some(Generation { max_tokens: 512, predicted: Some(predicted), cached: 0 });
        RequestInfo { generation, ..request(id, 10, Time(arrival_ms * 1_000_000)) }
    }

    fn drain(q: &mut JobQueue, now_ms: u64) -> Vec<u64> {
        std::iter::from_fn(|| q.pop(Time(now_ms * 1_000_000)).map(|(r, _)| r.0)).collect()
    }

    #[test]
    fn sjf_runs_shortest_predicted_first_and_fcfs_by_arrival() {
        let reqs = [req(0, 0, 300), req(1, 1, 20), req(2, 2, 100), req(3, 3, 20)];
        let mut sjf = JobQueue::new(Order::Sjf, None, 0.0);
        let mut fcfs = JobQueue::new(Order::Fcfs, None, 0.0);
        for r in &reqs {
            sjf.push(r);
            fcfs.push(r);
        }
        assert_eq!(sjf.oldest_arrival(), Some(Time(0)));
        // Equal predictions keep arrival order.
        assert_eq!(drain(&mut sjf, 10), vec![1, 3, 2, 0]);
        assert_eq!(drain(&mut fcfs, 10), vec![0, 1, 2, 3]);
        assert!(sjf.is_empty() && sjf.oldest_arrival().is_none());
    }

    #[test]
    fn without_a_prediction_max_tokens_orders_the_request() {
        let mut q = JobQueue::new(Order::Sjf, None, 0.0);
        let mut unknown = req(0, 0, 0);
        unknown.generation = Some(Generation { max_tokens: 50, predicted: None, cached: 0 });
        q.push(&unknown);
        q.push(&req(1, 1, 60));
        assert_eq!(drain(&mut q, 5), vec![0, 1]);
    }

    /// Aging factor 2, 1 ms per token: a 300-token job waits at most 600 ms, then goes ahead of
    /// shorter ones; before that it waits behind them.
    #[test]
    fn aging_promotes_a_long_job_that_waited_past_its_bound() {
        let aging = Some(Aging { factor: 2.0, token_ms: Millis(1.0) });
        let filled = |order| {
            let mut q = JobQueue::new(order, aging, 0.0);
            q.push(&req(0, 0, 300)); // promoted at 600 ms
            q.push(&req(1, 500, 20)); // promoted at 540 ms
            q.push(&req(2, 590, 30)); // promoted at 650 ms
            q
        };
        assert_eq!(drain(&mut filled(Order::Sjf), 595), vec![1, 2, 0], "at 595 ms only job 1 is overdue");
        assert_eq!(drain(&mut filled(Order::Sjf), 620), vec![1, 0, 2], "at 620 ms jobs 1 then 0 are overdue");
        assert_eq!(
            drain(&mut filled(Order::Sjf), 700),
            vec![1, 0, 2],
            "all overdue: by how long ago they were due"
        );
        assert_eq!(drain(&mut filled(Order::Fcfs), 700), vec![0, 1, 2], "FCFS keeps arrival order");
    }

    /// A conversation's next round, its earlier rounds in the prompt cache, goes before a new
    /// conversation's first round of the same predicted output and prompt length: only its
    /// uncached prefill counts. Without the cache they keep arrival order.
    #[test]
    fn a_cached_prompt_is_a_shorter_job_than_the_same_prompt_uncached() {
        let with_prompt = |id, arrival_ms, cached| {
            let mut r = req(id, arrival_ms, 50);
            r.input_len = 900;
            r.generation = r.generation.map(|g| Generation { cached, ..g });
            r
        };
        let mut q = JobQueue::new(Order::Sjf, None, 0.11);
        q.push(&with_prompt(0, 0, 0));
        q.push(&with_prompt(1, 1, 850));
        assert_eq!(job_length(&with_prompt(0, 0, 0), 0.11), 50 + 99);
        assert_eq!(job_length(&with_prompt(1, 1, 850), 0.11), 50 + 6);
        assert_eq!(drain(&mut q, 5), vec![1, 0]);
        let mut fcfs = JobQueue::new(Order::Fcfs, None, 0.11);
        fcfs.push(&with_prompt(0, 0, 0));
        fcfs.push(&with_prompt(1, 1, 850));
        assert_eq!(drain(&mut fcfs, 5), vec![0, 1]);
    }
}
