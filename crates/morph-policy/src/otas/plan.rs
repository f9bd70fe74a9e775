//! OTAS Algorithm 2: the dynamic program that picks a plan for every queued batch, in deadline
//! order, to maximise the expected utility of the batches that finish before their deadlines.
//! State (b, l_b): batch b ran under plan l_b (or was skipped, l_b = 0). The paper keeps one
//! path per state, its best utility and that path's clock, which loses paths that earn less so
//! far but leave more time (spec §2.6): on a burst of batches due together, a slow plan on the
//! first displaces the all-fast path and later batches are skipped, then evicted. Morph keeps
//! each state's Pareto front of (utility, clock) labels instead, up to [`MAX_LABELS`], so the
//! DP is exact on small queues and a heuristic for an NP-hard problem (Theorem 1) beyond them.
//! The initialisation follows the spec's cleaned reading (A7): row 0 is one start state
//! (utility 0, clock T), later rows start empty, a skip is a transition with Û = 0 and t̂ = 0,
//! and of two paths with equal utility the one with the earlier clock wins.

use morph_core::{Nanos, Time};

/// One queued batch as the planners see it: its deadline d_b, its mean utility Ū_b, and per
/// plan index (fastest first) `Profile(B_b, γ)` = (t̂_b, Û_b).
#[derive(Debug, Clone, PartialEq)]
pub struct BatchCosts {
    pub deadline: Time,
    pub mean_utility: f64,
    pub by_plan: Vec<(Nanos, f64)>,
}

/// What to do with a batch: run it under the plan at this index of L(γ), or skip it (`None`).
pub type Choice = Option<usize>;

/// The most labels a state keeps (the highest utilities, and always the earliest clock).
pub const MAX_LABELS: usize = 4;

/// A path reaching a state: its accumulated utility, its clock, and the state and label it came
/// from in the row before.
#[derive(Debug, Clone, Copy)]
struct Label {
    utility: f64,
    clock: u64,
    from: (usize, usize),
}

impl Label {
    /// At least as much utility, no later: `other` is never worth keeping beside it.
    fn dominates(&self, other: &Label) -> bool {
        self.utility >= other.utility && self.clock <= other.clock
    }

    /// More utility, or as much at an earlier clock (spec A7's tie-break).
    fn beats(&self, other: &Label) -> bool {
        self.utility > other.utility || (self.utility == other.utility && self.clock < other.clock)
    }
}

/// Adds `label` to a state's front unless a label there dominates it, dropping those it
/// dominates; past [`MAX_LABELS`] the lowest utilities go, the earliest clock always stays.
fn insert(front: &mut Vec<Label>, label: Label) {
    if front.iter().any(|l| l.dominates(&label)) {
        return;
    }
    front.retain(|l| !label.dominates(l));
    front.push(label);
    if front.len() > MAX_LABELS {
        // On a Pareto front the earliest clock has the least utility: keep it apart.
        let earliest = (0..front.len()).min_by_key(|&k| front[k].clock).unwrap_or(0);
        let keep = front.swap_remove(earliest);
        front.sort_by(|a, b| b.utility.total_cmp(&a.utility));
        front.truncate(MAX_LABELS - 1);
        front.push(keep);
    }
}

/// OTAS Alg. 2 over `batches` (already in deadline order, line 1) from clock `now`. With
/// `skip` false no batch is skipped: one that cannot finish in time still runs and earns
/// nothing (the PetS-like baseline's rule).
pub fn plan(now: Time, batches: &[BatchCosts], skip: bool) -> Vec<Choice> {
    let n_plans = batches.first().map_or(0, |b| b.by_plan.len());
    let width = n_plans + 1; // state 0: skipped; state l ≥ 1: plan index l − 1
    let mut rows: Vec<Vec<Vec<Label>>> = vec![vec![Vec::new(); width]; batches.len() + 1];
    rows[0][0].push(Label { utility: 0.0, clock: now.0, from: (0, 0) });
    for (b, batch) in batches.iter().enumerate() {
        let (before, after) = rows.split_at_mut(b + 1);
        let (prev, row) = (&before[b], &mut after[0]);
        for (state, front) in prev.iter().enumerate() {
            for (at, p) in front.iter().enumerate() {
                let from = (state, at);
                // Line 15: batch b is not executed.
                if skip {
                    insert(&mut row[0], Label { from, ..*p });
                }
                // Lines 24–32: batch b runs under plan l; feasible if it ends before d_b (Eq. 1a).
                for (l, &(took, gained)) in batch.by_plan.iter().enumerate() {
                    let clock = p.clock.saturating_add(took);
                    let on_time = clock < batch.deadline.0;
                    if !on_time && skip {
                        continue; // line 37: infeasible
                    }
                    let gained = if on_time { gained } else { 0.0 };
                    insert(&mut row[l + 1], Label { utility: p.utility + gained, clock, from });
                }
            }
        }
    }
    // Lines 43–46: the best last label, then back along the predecessors.
    let mut choices = vec![None; batches.len()];
    let last = &rows[batches.len()];
    let mut best: Option<(usize, usize)> = None;
    for (state, front) in last.iter().enumerate() {
        for (at, label) in front.iter().enumerate() {
            if best.is_none_or(|(s, a)| label.beats(&last[s][a])) {
                best = Some((state, at));
            }
        }
    }
    let Some(mut at) = best else { return choices };
    for b in (0..batches.len()).rev() {
        choices[b] = at.0.checked_sub(1);
        at = rows[b + 1][at.0][at.1].from;
    }
    choices
}

/// The expected utility and end clock of running `batches` by `choices` from `now`, counting a
/// batch only if it ends before its deadline (what [`plan`] maximises).
pub fn value(now: Time, batches: &[BatchCosts], choices: &[Choice]) -> (f64, u64) {
    let mut clock = now.0;
    let mut utility = 0.0;
    for (batch, choice) in batches.iter().zip(choices) {
        if let Some(l) = *choice {
            let (took, gained) = batch.by_plan[l];
            clock += took;
            if clock < batch.deadline.0 {
                utility += gained;
            }
        }
    }
    (utility, clock)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(deadline_ms: u64, by_plan: &[(Nanos, f64)]) -> BatchCosts {
        let by_plan = by_plan.iter().map(|&(ms, u)| (ms * 1_000_000, u)).collect();
        BatchCosts { deadline: Time(deadline_ms * 1_000_000), mean_utility: 0.5, by_plan }
    }

    #[test]
    fn a_lone_batch_with_time_to_spare_takes_the_most_accurate_plan() {
        let b = [batch(100, &[(10, 0.8), (20, 0.9), (40, 0.95)])];
        assert_eq!(plan(Time::ZERO, &b, true), [Some(2)]);
    }

    #[test]
    fn a_plan_that_would_miss_the_deadline_is_not_chosen() {
        // Plan 2 ends at 40 ms, past the 30 ms deadline (infeasible), plan 1 at 20.
        let b = [batch(30, &[(10, 0.8), (20, 0.9), (40, 0.95)])];
        assert_eq!(plan(Time::ZERO, &b, true), [Some(1)]);
        // Ending exactly at the deadline is late (Eq. 1a is strict).
        let b = [batch(20, &[(10, 0.8), (20, 0.9)])];
        assert_eq!(plan(Time::ZERO, &b, true), [Some(0)]);
    }

    #[test]
    fn the_dp_trades_accuracy_on_one_batch_for_a_second_batch_in_time() {
        // Alone, batch 1 would take plan 1 (0.9). Then batch 2 (deadline 40) misses: 20 + 25.
        // With plan index 0 on batch 1 (10 ms) batch 2 fits at plan index 0: 0.8 + 0.8 > 0.9.
        let b = [batch(30, &[(10, 0.8), (20, 0.9)]), batch(40, &[(25, 0.8), (35, 0.85)])];
        assert_eq!(plan(Time::ZERO, &b, true), [Some(0), Some(0)]);
        assert_eq!(value(Time::ZERO, &b, &[Some(0), Some(0)]).0, 1.6);
    }

    #[test]
    fn a_batch_that_cannot_finish_in_time_is_skipped_and_the_rest_planned() {
        let b = [batch(5, &[(10, 0.8), (12, 0.85)]), batch(50, &[(20, 0.5), (30, 0.6)])];
        assert_eq!(plan(Time::ZERO, &b, true), [None, Some(1)]);
        // A cheap but worthless batch is skipped when running it costs a later batch accuracy.
        let b = [batch(35, &[(20, 0.0), (25, 0.0)]), batch(40, &[(15, 0.5), (30, 0.6)])];
        assert_eq!(plan(Time::ZERO, &b, true), [None, Some(1)]);
    }

    #[test]
    fn without_skipping_a_hopeless_batch_runs_fastest_and_earns_nothing() {
        let b = [batch(5, &[(10, 0.8), (20, 0.9)]), batch(50, &[(20, 0.5), (30, 0.6)])];
        assert_eq!(plan(Time::ZERO, &b, false), [Some(0), Some(1)]);
    }

    #[test]
    fn equal_utility_goes_to_the_earlier_clock() {
        // Two plans with the same expected utility: the faster one leaves more time.
        let b = [batch(100, &[(10, 0.8), (30, 0.8)])];
        assert_eq!(plan(Time::ZERO, &b, true), [Some(0)]);
        // Nothing to gain: skipping (clock unchanged) beats running.
        let b = [batch(100, &[(10, 0.0)])];
        assert_eq!(plan(Time::ZERO, &b, true), [None]);
    }

    /// The best fixed plan of a queue: the same plan for every batch, by the utility it earns.
    fn best_fixed(batches: &[BatchCosts]) -> (usize, f64) {
        (0..batches[0].by_plan.len())
            .map(|l| (l, value(Time::ZERO, batches, &vec![Some(l); batches.len()]).0))
            .fold((0, f64::MIN), |best, c| if c.1 > best.1 { c } else { best })
    }

    #[test]
    fn on_a_queue_where_one_fixed_plan_dominates_the_dp_runs_it_for_every_batch() {
        // Loose deadlines: the accurate plan (index 1) fits every batch and earns the most.
        let loose: Vec<BatchCosts> = (1..=8).map(|b| batch(1000 * b, &[(10, 0.8), (30, 0.9)])).collect();
        // Tight ones: only the fast plan keeps every batch in time (30 ms each would miss).
        let tight: Vec<BatchCosts> = (1..=8).map(|b| batch(12 * b, &[(10, 0.8), (30, 0.9)])).collect();
        for (queue, plan_index) in [(&loose, 1), (&tight, 0)] {
            let (fixed, earned) = best_fixed(queue);
            assert_eq!(fixed, plan_index);
            let chosen = plan(Time::ZERO, queue, true);
            assert_eq!(chosen, vec![Some(plan_index); queue.len()]);
            assert!(value(Time::ZERO, queue, &chosen).0 >= earned - 1e-9);
        }
    }

    #[test]
    fn the_clock_starts_at_now() {
        let b = [batch(100, &[(10, 0.8), (30, 0.9)])];
        assert_eq!(plan(Time(75 * 1_000_000), &b, true), [Some(0)]);
        assert_eq!(plan(Time(95 * 1_000_000), &b, true), [None]);
    }

    /// xorshift64*: deterministic cases without an RNG dependency.
    fn rng(seed: &mut u64) -> u64 {
        *seed ^= *seed >> 12;
        *seed ^= *seed << 25;
        *seed ^= *seed >> 27;
        seed.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33
    }

    fn all_choices(n_batches: usize, n_plans: usize) -> Vec<Vec<Choice>> {
        let mut out = vec![Vec::new()];
        for _ in 0..n_batches {
            out = out
                .into_iter()
                .flat_map(|prefix| {
                    (0..=n_plans).map(move |l| {
                        let mut next = prefix.clone();
                        next.push(l.checked_sub(1));
                        next
                    })
                })
                .collect();
        }
        out
    }

    /// Brute force over every assignment of plans (and skips) for up to 5 batches × 4 plans: the
    /// DP's plan is always feasible (every batch it runs ends in time) and, keeping each state's
    /// Pareto front, always the best.
    #[test]
    fn the_dp_is_feasible_and_close_to_brute_force() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let (mut cases, mut optimal, mut worst_gap) = (0, 0, 0.0f64);
        for _ in 0..400 {
            let n_batches = 1 + rng(&mut seed) as usize % 5;
            let n_plans = 1 + rng(&mut seed) as usize % 4;
            let mut deadline = 0;
            let batches: Vec<BatchCosts> = (0..n_batches)
                .map(|_| {
                    deadline += 5 + rng(&mut seed) % 40;
                    let value = (1 + rng(&mut seed) % 10) as f64;
                    let by_plan = (0..n_plans)
                        .map(|l| (3 + 4 * l as u64 + rng(&mut seed) % 10, value * (0.6 + 0.1 * l as f64)))
                        .collect::<Vec<_>>();
                    batch(deadline, &by_plan)
                })
                .collect();
            let chosen = plan(Time::ZERO, &batches, true);
            let mut clock = 0;
            for (b, choice) in batches.iter().zip(&chosen) {
                if let Some(l) = *choice {
                    clock += b.by_plan[l].0;
                    assert!(clock < b.deadline.0, "the DP ran a batch past its deadline: {chosen:?}");
                }
            }
            let got = value(Time::ZERO, &batches, &chosen).0;
            let best = all_choices(n_batches, n_plans)
                .iter()
                .map(|c| value(Time::ZERO, &batches, c).0)
                .fold(0.0, f64::max);
            assert!(got <= best + 1e-9);
            cases += 1;
            optimal += usize::from(got >= best - 1e-9);
            if best > 0.0 {
                worst_gap = worst_gap.max(1.0 - got / best);
            }
        }
        assert_eq!(optimal, cases, "the DP's worst gap to the best: {:.1}%", worst_gap * 100.0);
    }

    /// A burst of batches due together: the all-fast path runs every one; one path per state
    /// (the paper's) let a slow first plan displace it and skipped the last two.
    #[test]
    fn a_burst_due_together_runs_every_batch() {
        let burst: Vec<BatchCosts> = (0..6).map(|_| batch(70, &[(10, 1.0), (30, 1.2)])).collect();
        let chosen = plan(Time::ZERO, &burst, true);
        assert!(chosen.iter().all(Option::is_some), "{chosen:?}");
        assert_eq!(value(Time::ZERO, &burst, &chosen).0, 6.0);
    }
}
