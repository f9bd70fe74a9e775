//! Arlo's Request Scheduler (§3.4, Algorithm 1): a multi-level queue with one level per
//! runtime in increasing `max_length`; each level keeps its instances ordered by outstanding
//! requests, least loaded at the head. A request walks at most `L` candidate levels that fit it,
//! taking the first head whose congestion `P = N / M` is below a threshold `λ` that decays by
//! `α` per level; if none qualifies it goes to the first candidate's head.
//! Each level keeps its instances in buckets by outstanding requests (a bucket queue: loads are
//! small integers), so a dispatch is O(L) level lookups plus O(1) to move the chosen instance
//! up one bucket, and a completion O(1) to move it down.
//!
//! The same structure serves the baselines' rules ([`DispatchRule`]): the ablations ILB and IG
//! (§5.2.4) and INFaaS-like first fit.

use morph_core::InstanceId;

/// Algorithm 1's inputs λ, α and L; the paper's defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DispatchParams {
    /// λ: initial congestion threshold.
    pub lambda: f64,
    /// α: threshold decay per level walked.
    pub alpha: f64,
    /// L: most candidate levels to peek.
    pub max_peek: usize,
}

impl Default for DispatchParams {
    fn default() -> Self {
        Self { lambda: 0.85, alpha: 0.9, max_peek: 6 }
    }
}

/// How a request picks its instance among the levels that fit it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DispatchRule {
    /// Algorithm 1.
    #[default]
    Arlo,
    /// ILB: the ideal runtime (least padding), least loaded instance within it.
    Ideal,
    /// IG: the least loaded head among all fitting runtimes (plain load balancing when there is
    /// one runtime, as ST and DT).
    Greedy,
    /// INFaaS-like first fit: the first runtime in increasing max length (least padding) whose
    /// least loaded instance is under its capacity M; if every one is full, as `Greedy`. Unlike
    /// Algorithm 1 it demotes only when an instance is full, and walks every candidate.
    FirstFit,
}

#[derive(Debug)]
struct Level {
    max_len: u32,
    /// M: the most outstanding requests an instance of this runtime serves within the SLO.
    capacity: u32,
    /// `buckets[n]`: the instances with n outstanding requests.
    buckets: Vec<Vec<InstanceId>>,
    /// The lowest n whose bucket is not empty (`buckets.len()` when the level has none).
    min: usize,
    len: usize,
}

impl Level {
    fn new(max_len: u32, capacity: u32) -> Self {
        Self { max_len, capacity: capacity.max(1), buckets: Vec::new(), min: 0, len: 0 }
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The least loaded instance and its outstanding requests.
    fn head(&self) -> Option<(u32, InstanceId)> {
        (self.len > 0).then(|| (self.min as u32, self.buckets[self.min][0]))
    }
}

/// Where an instance is: its level, its outstanding requests, its place in that bucket.
#[derive(Debug, Clone, Copy)]
struct Position {
    level: usize,
    outstanding: u32,
    at: usize,
}

#[derive(Debug, Default)]
pub struct MultiLevelQueue {
    params: DispatchParams,
    rule: DispatchRule,
    /// Ascending `max_len`.
    levels: Vec<Level>,
    /// By instance id.
    positions: Vec<Option<Position>>,
}

impl MultiLevelQueue {
    pub fn new(params: DispatchParams) -> Self {
        Self { params, ..Self::default() }
    }

    pub fn with_rule(params: DispatchParams, rule: DispatchRule) -> Self {
        Self { params, rule, ..Self::default() }
    }

    /// Adds an idle instance of the runtime with `max_len`, whose instances serve at most
    /// `capacity` outstanding requests within the SLO (M_i).
    pub fn add_instance(&mut self, id: InstanceId, max_len: u32, capacity: u32) {
        self.remove_instance(id);
        let at = self.levels.partition_point(|l| l.max_len < max_len);
        if self.levels.get(at).is_none_or(|l| l.max_len != max_len) {
            self.levels.insert(at, Level::new(max_len, capacity));
            for position in self.positions.iter_mut().flatten() {
                if position.level >= at {
                    position.level += 1;
                }
            }
        }
        self.place(id, at, 0);
    }

    /// Stops dispatching to `id` (it is being retired or replaced); its level stays.
    pub fn remove_instance(&mut self, id: InstanceId) {
        if let Some(position) = self.positions.get_mut(id.0 as usize).and_then(Option::take) {
            self.unplace(id, position);
        }
    }

    /// Puts `id` in `level`'s bucket for `outstanding` requests.
    fn place(&mut self, id: InstanceId, level: usize, outstanding: u32) {
        let l = &mut self.levels[level];
        let n = outstanding as usize;
        if l.buckets.len() <= n {
            l.buckets.resize_with(n + 1, Vec::new);
        }
        l.buckets[n].push(id);
        l.min = if l.len == 0 { n } else { l.min.min(n) };
        l.len += 1;
        let i = id.0 as usize;
        if self.positions.len() <= i {
            self.positions.resize(i + 1, None);
        }
        self.positions[i] = Some(Position { level, outstanding, at: l.buckets[n].len() - 1 });
    }

    /// Takes `id` out of its bucket (its position is already taken or about to be rewritten).
    fn unplace(&mut self, id: InstanceId, position: Position) {
        let l = &mut self.levels[position.level];
        let bucket = &mut l.buckets[position.outstanding as usize];
        debug_assert_eq!(bucket[position.at], id);
        bucket.swap_remove(position.at);
        if let Some(moved) = bucket.get(position.at) {
            self.positions[moved.0 as usize].as_mut().expect("a placed instance").at = position.at;
        }
        l.len -= 1;
        while l.min < l.buckets.len() && l.buckets[l.min].is_empty() {
            l.min += 1;
        }
    }

    /// The instance a request of `len` tokens goes to under the rule, or `None` if no runtime
    /// fits it (or the fitting ones have no instances).
    pub fn choose(&self, len: u32) -> Option<InstanceId> {
        let first = self.levels.partition_point(|l| l.max_len < len);
        let mut candidates = self.levels[first..].iter().filter(|l| !l.is_empty());
        match self.rule {
            DispatchRule::Arlo => self.algorithm_1(candidates),
            DispatchRule::Ideal => candidates.next()?.head().map(|(_, id)| id),
            DispatchRule::Greedy => Self::least_loaded(candidates),
            DispatchRule::FirstFit => candidates
                .clone()
                .find_map(|l| l.head().filter(|(n, _)| *n < l.capacity).map(|(_, id)| id))
                .or_else(|| Self::least_loaded(candidates)),
        }
    }

    /// Least outstanding requests among the heads; ties go to the shorter runtime.
    fn least_loaded<'a>(levels: impl Iterator<Item = &'a Level>) -> Option<InstanceId> {
        levels.filter_map(Level::head).min_by_key(|(n, _)| *n).map(|(_, id)| id)
    }

    /// Algorithm 1, lines 1–20.
    fn algorithm_1<'a>(&self, candidates: impl Iterator<Item = &'a Level>) -> Option<InstanceId> {
        // Line 2: candidate runtimes, increasing max_length; lines 3–5: only the first L.
        let candidates = candidates.take(self.params.max_peek);
        let mut lambda = self.params.lambda;
        let mut top = None;
        for level in candidates {
            let (outstanding, head) = level.head()?;
            top = top.or(Some(head));
            // Lines 7–9: congestion of the head instance, P = N / M.
            let p = f64::from(outstanding) / f64::from(level.capacity);
            if p < lambda {
                return Some(head); // lines 10–13
            }
            lambda *= self.params.alpha; // line 15
        }
        top // lines 18–19: the top candidate's head
    }

    /// Lines 21–22: dispatches a request of `len` tokens and reorders the chosen level.
    pub fn dispatch(&mut self, len: u32) -> Option<InstanceId> {
        let id = self.choose(len)?;
        self.adjust(id, 1);
        Some(id)
    }

    /// A request on `id` finished.
    pub fn complete(&mut self, id: InstanceId) {
        self.adjust(id, -1);
    }

    pub fn outstanding(&self, id: InstanceId) -> Option<u32> {
        self.position(id).map(|s| s.outstanding)
    }

    fn position(&self, id: InstanceId) -> Option<Position> {
        self.positions.get(id.0 as usize).copied().flatten()
    }

    fn adjust(&mut self, id: InstanceId, delta: i32) {
        let Some(position) = self.position(id) else { return };
        self.unplace(id, position);
        self.place(id, position.level, position.outstanding.saturating_add_signed(delta));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Loads an instance with `n` outstanding requests.
    fn load(q: &mut MultiLevelQueue, id: u32, n: u32) {
        for _ in 0..n {
            q.adjust(InstanceId(id), 1);
        }
    }

    /// The paper's worked example (§3.4, Fig. 5): L = 3, λ = 0.85, α = 0.9; a request of length
    /// 200 has candidates Q2, Q3, Q4. Q2's head is at 54/60 = 0.9 ≥ 0.85: rejected. Q3's head is
    /// at 28/48 ≈ 0.58 < 0.765: chosen.
    #[test]
    fn reproduces_the_papers_worked_example() {
        let mut q = MultiLevelQueue::new(DispatchParams { lambda: 0.85, alpha: 0.9, max_peek: 3 });
        let levels = [
            (128, 64, [(0, 10), (1, 20)]),
            (256, 60, [(2, 54), (3, 58)]),
            (384, 48, [(4, 28), (5, 40)]),
            (512, 40, [(6, 5), (7, 9)]),
        ];
        for (max_len, capacity, instances) in levels {
            for (id, n) in instances {
                q.add_instance(InstanceId(id), max_len, capacity);
                load(&mut q, id, n);
            }
        }
        assert_eq!(q.dispatch(200), Some(InstanceId(4)));
        assert_eq!(q.outstanding(InstanceId(4)), Some(29));
        // A short request fits Q1, whose head (10/64) is under λ.
        assert_eq!(q.choose(100), Some(InstanceId(0)));
    }

    #[test]
    fn falls_back_to_the_first_candidate_and_peeks_at_most_l_levels() {
        let mut q = MultiLevelQueue::new(DispatchParams { lambda: 0.85, alpha: 0.9, max_peek: 2 });
        q.add_instance(InstanceId(0), 64, 10);
        q.add_instance(InstanceId(1), 128, 10);
        q.add_instance(InstanceId(2), 256, 10);
        load(&mut q, 0, 9); // 0.9 ≥ 0.85
        load(&mut q, 1, 8); // 0.8 ≥ 0.765
        // Level 3 (idle) is beyond L = 2, so the request falls back to level 1's head.
        assert_eq!(q.choose(10), Some(InstanceId(0)));
        q.params.max_peek = 3;
        assert_eq!(q.choose(10), Some(InstanceId(2)));
        assert_eq!(q.choose(300), None, "no runtime fits 300 tokens");
    }

    #[test]
    fn the_least_loaded_instance_heads_its_level() {
        let mut q = MultiLevelQueue::new(DispatchParams::default());
        for id in 0..3 {
            q.add_instance(InstanceId(id), 128, 100);
        }
        // Each round of three takes every instance once.
        for _ in 0..2 {
            let mut round: Vec<u32> = (0..3).map(|_| q.dispatch(50).unwrap().0).collect();
            round.sort_unstable();
            assert_eq!(round, vec![0, 1, 2]);
        }
        q.complete(InstanceId(1));
        assert_eq!(q.dispatch(50), Some(InstanceId(1)));
        assert_eq!((q.outstanding(InstanceId(0)), q.outstanding(InstanceId(1))), (Some(2), Some(2)));
        q.remove_instance(InstanceId(0));
        assert_eq!(q.outstanding(InstanceId(0)), None);
        let mut next = [q.dispatch(50).unwrap().0, q.dispatch(50).unwrap().0];
        next.sort_unstable();
        assert_eq!(next, [1, 2], "a removed instance takes no requests");
    }

    #[test]
    fn the_baseline_rules_pick_as_described() {
        // Level 64 (capacity 4): instance 0 at 4/4 (full); level 128: 1 at 2/4; level 512: 2 at 1/4.
        let build = |rule| {
            let mut q = MultiLevelQueue::with_rule(DispatchParams::default(), rule);
            for (id, len, n) in [(0, 64, 4), (1, 128, 2), (2, 512, 1)] {
                q.add_instance(InstanceId(id), len, 4);
                load(&mut q, id, n);
            }
            q
        };
        assert_eq!(
            build(DispatchRule::Ideal).choose(10),
            Some(InstanceId(0)),
            "ILB stays in the ideal runtime"
        );
        assert_eq!(build(DispatchRule::Greedy).choose(10), Some(InstanceId(2)), "IG takes the least busy");
        assert_eq!(build(DispatchRule::FirstFit).choose(10), Some(InstanceId(1)), "first runtime not full");
        let mut q = build(DispatchRule::Arlo);
        q.remove_instance(InstanceId(1));
        assert_eq!(q.choose(100), Some(InstanceId(2)), "a removed instance takes no requests");
    }
}
