//! One recording of a partitioned run ([`crate::partitions`]) from its partitions' own: each
//! partition served every n-th request of the stream on its share of the instances, so counts
//! and latencies add up, instances line up one partition after another, and what the stream
//! itself was (its gaps) is stated by whoever dealt it.

use super::{ArrivalGaps, Recorder};

impl Recorder {
    /// The recording of the whole run from `parts` (partition k took requests k, k + n, k + 2n, …
    /// of the stream, n being their count); `gaps`: the whole stream's.
    pub(crate) fn merged(parts: Vec<Recorder>, gaps: ArrivalGaps) -> Recorder {
        let n = parts.len();
        let mut parts = parts.into_iter();
        let mut whole = parts.next().expect("a run has one partition at least");
        if n == 1 {
            return whole;
        }
        let mut slots = vec![std::mem::take(&mut whole.slots)];
        whole.answers = whole.answers.take().map(|answers| spread(Vec::new(), answers, 0, n));
        for (k, part) in parts.enumerate().map(|(k, p)| (k + 1, p)) {
            debug_assert!(part.utility.is_none(), "a partitioned run keeps no utility account");
            whole.warming.absorb(part.warming);
            whole.measured.absorb(part.measured);
            whole.timeline.absorb(part.timeline);
            if let Some(answers) = part.answers {
                whole.answers = Some(spread(whole.answers.take().unwrap_or_default(), answers, k, n));
            }
            whole.busy.extend(part.busy);
            slots.push(part.slots);
            for (key, (sum, count)) in part.gauges {
                let entry = whole.gauges.entry(key).or_insert((0.0, 0));
                entry.0 += sum;
                entry.1 += count;
            }
            whole.stage_series.extend(part.stage_series);
            whole.cold_starts += part.cold_starts;
            whole.warm_starts += part.warm_starts;
            whole.evictions += part.evictions;
            whole.last = whole.last.max(part.last);
        }
        whole.stage_series.sort_by(|a, b| a.0.total_cmp(&b.0));
        whole.slots = summed(slots);
        whole.gaps = gaps;
        whole
    }
}

/// `answers` of partition `k` of `n` (its i-th request is the stream's `i·n + k`-th) put in
/// their places in `all`.
fn spread<T>(mut all: Vec<Option<T>>, answers: Vec<Option<T>>, k: usize, n: usize) -> Vec<Option<T>> {
    for (i, answer) in answers.into_iter().enumerate() {
        let at = i * n + k;
        if all.len() <= at {
            all.resize_with(at + 1, || None);
        }
        all[at] = answer;
    }
    all
}

/// The partitions' slot changes `(time, instances, cores)` as one series of their sums.
fn summed(parts: Vec<Vec<(morph_core::Time, usize, u64)>>) -> Vec<(morph_core::Time, usize, u64)> {
    let mut changes: Vec<(morph_core::Time, usize, usize, u64)> = parts
        .iter()
        .enumerate()
        .flat_map(|(k, part)| part.iter().map(move |&(t, count, cores)| (t, k, count, cores)))
        .collect();
    changes.sort_by_key(|c| c.0);
    let mut now = vec![(0, 0); parts.len()];
    let mut series: Vec<(morph_core::Time, usize, u64)> = Vec::new();
    for (t, k, count, cores) in changes {
        now[k] = (count, cores);
        let total = (now.iter().map(|c| c.0).sum(), now.iter().map(|c| c.1).sum());
        match series.last_mut() {
            Some(last) if last.0 == t => (last.1, last.2) = total,
            _ => series.push((t, total.0, total.1)),
        }
    }
    series
}

#[cfg(test)]
mod tests {
    use morph_core::Time;

    use super::*;

    #[test]
    fn answers_go_back_to_their_places_in_the_stream() {
        let all = spread(Vec::new(), vec![Some('a'), Some('c')], 0, 2);
        let all = spread(all, vec![Some('b'), Some('d')], 1, 2);
        assert_eq!(all, [Some('a'), Some('b'), Some('c'), Some('d')]);
    }

    #[test]
    fn slot_changes_sum_over_partitions_at_each_moment() {
        let a = vec![(Time(0), 2, 2), (Time(5), 3, 3)];
        let b = vec![(Time(0), 2, 4), (Time(3), 1, 2), (Time(5), 2, 4)];
        assert_eq!(summed(vec![a, b]), [(Time(0), 4, 6), (Time(3), 3, 4), (Time(5), 5, 7)]);
    }
}
