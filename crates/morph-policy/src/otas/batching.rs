//! OTAS Algorithm 1: adding a query to the batch queue. A request joins the newest batch that
//! opened at most δ before it arrived, has room (ε), and whose deadline and utility are close to
//! its own (η, μ); otherwise it opens a new batch. Tasks are not a condition: a batch may mix
//! tasks (§III-A). The queue stays in creation order (spec A5); Alg. 2 sorts a view.

use morph_core::time::Millis;
use morph_core::{RequestId, TaskId, Time};
use serde::{Deserialize, Serialize};

/// A queued request as OTAS sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Member {
    pub id: RequestId,
    pub input_len: u32,
    pub task: TaskId,
    /// s_r.
    pub arrival: Time,
    /// d_r = s_r + l_r; `Time(u64::MAX)` when the request has none.
    pub deadline: Time,
    /// u_r.
    pub utility: f64,
}

/// The batching thresholds of Alg. 1 (defaults: OTAS §V).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchingConfig {
    /// δ: a request joins a batch only if it arrived within δ of the batch's opening.
    pub delta_ms: Millis,
    /// ε: the most requests in a batch.
    pub epsilon: usize,
    /// η: the largest difference between the batch's and the request's deadline.
    pub eta_ms: Millis,
    /// μ: the largest difference between the batch's utility (its first query's) and the
    /// request's.
    pub mu: f64,
    /// Morph's extension, off by default: a request joins only a batch whose longest input is
    /// within this many tokens of its own (text batches pad to their longest row).
    pub length_window: Option<u32>,
}

impl Default for BatchingConfig {
    fn default() -> Self {
        Self { delta_ms: Millis(500.0), epsilon: 64, eta_ms: Millis(500.0), mu: 0.8, length_window: None }
    }
}

/// A batch B_b of the queue.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// s_b = min s_r.
    pub opened: Time,
    /// d_b = min d_r.
    pub deadline: Time,
    /// u_b: the utility of the first query that joined.
    pub utility: f64,
    pub members: Vec<Member>,
}

impl Batch {
    fn new(first: Member) -> Self {
        Self { opened: first.arrival, deadline: first.deadline, utility: first.utility, members: vec![first] }
    }

    /// The longest input in the batch (what a dynamic runtime pads to).
    pub fn longest(&self) -> u32 {
        self.members.iter().map(|m| m.input_len).max().unwrap_or(0)
    }

    /// Ū_b: the mean utility of its requests (spec A10).
    pub fn mean_utility(&self) -> f64 {
        self.members.iter().map(|m| m.utility).sum::<f64>() / self.members.len().max(1) as f64
    }

    fn push(&mut self, member: Member) {
        self.opened = self.opened.min(member.arrival);
        self.deadline = self.deadline.min(member.deadline);
        self.members.push(member);
    }

    /// Removes the members `doomed` selects and recomputes s_b and d_b (u_b stays the first
    /// query's). Returns the removed ones.
    pub fn remove_where(&mut self, mut doomed: impl FnMut(&Member) -> bool) -> Vec<Member> {
        let (gone, kept): (Vec<Member>, Vec<Member>) = self.members.drain(..).partition(|m| doomed(m));
        self.members = kept;
        self.opened = self.members.iter().map(|m| m.arrival).min().unwrap_or(self.opened);
        self.deadline = self.members.iter().map(|m| m.deadline).min().unwrap_or(self.deadline);
        gone
    }
}

/// OTAS Alg. 1: adds `r` to the newest batch of `queue` that takes it, or opens a new one.
/// `rows` caps ε further (the instances' rows per batch).
pub fn join(queue: &mut Vec<Batch>, r: Member, config: &BatchingConfig, rows: usize) -> usize {
    let epsilon = config.epsilon.min(rows).max(1);
    let (delta, eta) = (config.delta_ms.nanos(), config.eta_ms.nanos());
    // Alg. 1 line 1: from the newest batch (b = N_B) down to the first.
    for (b, batch) in queue.iter_mut().enumerate().rev() {
        if batch.opened.0.saturating_add(delta) < r.arrival.0 {
            break; // line 2: opened more than δ before r arrived (and every older one too).
        }
        let far = |x: Time, y: Time| x.0.abs_diff(y.0) > eta;
        let too_long = config.length_window.is_some_and(|w| batch.longest().abs_diff(r.input_len) > w);
        if batch.members.len() >= epsilon                   // line 4: full
            || far(batch.deadline, r.deadline)              // line 6: deadlines apart by > η
            || (batch.utility - r.utility).abs() > config.mu // line 8: utilities apart by > μ
            || too_long
        {
            continue;
        }
        batch.push(r); // line 10
        return b;
    }
    queue.push(Batch::new(r)); // line 13: a new batch
    queue.len() - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(id: u64, arrival_ms: f64, slo_ms: f64, utility: f64) -> Member {
        Member {
            id: RequestId(id),
            input_len: 20,
            task: TaskId(0),
            arrival: Time::from_millis_f64(arrival_ms),
            deadline: Time::from_millis_f64(arrival_ms + slo_ms),
            utility,
        }
    }

    fn ids(queue: &[Batch]) -> Vec<Vec<u64>> {
        queue.iter().map(|b| b.members.iter().map(|m| m.id.0).collect()).collect()
    }

    #[test]
    fn close_arrivals_deadlines_and_utilities_share_a_batch() {
        let mut q = Vec::new();
        let c = BatchingConfig::default();
        join(&mut q, at(1, 0.0, 600.0, 0.3), &c, 64);
        join(&mut q, at(2, 100.0, 1000.0, 1.0), &c, 64);
        assert_eq!(ids(&q), [vec![1, 2]]);
        // s_b and d_b stay minima, u_b the first query's.
        assert_eq!((q[0].opened, q[0].deadline, q[0].utility), (Time(0), Time::from_millis_f64(600.0), 0.3));
    }

    #[test]
    fn a_batch_opened_more_than_delta_ago_stops_the_search() {
        let mut q = Vec::new();
        let c = BatchingConfig::default();
        join(&mut q, at(1, 0.0, 600.0, 0.3), &c, 64);
        join(&mut q, at(2, 500.0, 600.0, 0.3), &c, 64); // exactly δ later: still joins
        join(&mut q, at(3, 501.0, 600.0, 0.3), &c, 64); // s_b + δ < s_r: a new batch
        assert_eq!(ids(&q), [vec![1, 2], vec![3]]);
    }

    #[test]
    fn a_full_batch_is_passed_over_for_an_older_one_that_fits() {
        let c = BatchingConfig { epsilon: 2, ..BatchingConfig::default() };
        let mut q = Vec::new();
        join(&mut q, at(1, 0.0, 600.0, 0.3), &c, 64);
        join(&mut q, at(2, 10.0, 600.0, 1.0), &BatchingConfig { mu: 0.1, ..c }, 64); // own batch
        join(&mut q, at(3, 20.0, 600.0, 1.0), &c, 64); // joins batch 2 (newest first)
        join(&mut q, at(4, 30.0, 600.0, 0.3), &c, 64); // batch 2 full: continue to batch 1
        assert_eq!(ids(&q), [vec![1, 4], vec![2, 3]]);
        // The instances' rows cap ε too.
        join(&mut q, at(5, 40.0, 600.0, 0.3), &BatchingConfig::default(), 2);
        assert_eq!(ids(&q).len(), 3);
    }

    #[test]
    fn deadlines_more_than_eta_apart_do_not_mix() {
        let mut q = Vec::new();
        let c = BatchingConfig::default();
        join(&mut q, at(1, 0.0, 600.0, 0.3), &c, 64);
        join(&mut q, at(2, 0.0, 1100.0, 0.3), &c, 64); // |600 − 1100| = 500: joins
        join(&mut q, at(3, 0.0, 1101.0, 0.3), &c, 64); // 501 from d_b = 600: new batch
        assert_eq!(ids(&q), [vec![1, 2], vec![3]]);
    }

    #[test]
    fn utilities_more_than_mu_apart_do_not_mix() {
        let mut q = Vec::new();
        let c = BatchingConfig::default();
        join(&mut q, at(1, 0.0, 600.0, 1.0), &c, 64);
        join(&mut q, at(2, 0.0, 600.0, 0.2), &c, 64); // |1 − 0.2| = 0.8 = μ: joins
        join(&mut q, at(3, 0.0, 600.0, 0.01), &c, 64); // 0.99 from u_b = 1: new batch
        join(&mut q, at(4, 0.0, 600.0, 0.9), &c, 64); // 0.89 from the newest's 0.01: on to batch 1
        assert_eq!(ids(&q), [vec![1, 2, 4], vec![3]]);
    }

    #[test]
    fn the_length_window_keeps_long_and_short_inputs_apart() {
        let c = BatchingConfig { length_window: Some(16), ..BatchingConfig::default() };
        let mut q = Vec::new();
        join(&mut q, at(1, 0.0, 600.0, 0.3), &c, 64);
        let long = Member { input_len: 60, ..at(2, 0.0, 600.0, 0.3) };
        join(&mut q, long, &c, 64);
        assert_eq!(ids(&q), [vec![1], vec![2]]);
    }

    #[test]
    fn removing_members_recomputes_the_minima() {
        let mut q = Vec::new();
        let c = BatchingConfig::default();
        join(&mut q, at(1, 0.0, 600.0, 0.3), &c, 64);
        join(&mut q, at(2, 100.0, 900.0, 0.3), &c, 64);
        let gone = q[0].remove_where(|m| m.id == RequestId(1));
        assert_eq!(gone.len(), 1);
        assert_eq!(
            (q[0].opened, q[0].deadline),
            (Time::from_millis_f64(100.0), Time::from_millis_f64(1000.0))
        );
    }
}
