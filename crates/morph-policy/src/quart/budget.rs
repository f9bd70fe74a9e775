//! The CPU compensator when slots run out (Morph's extension of §5.3): when the replicas every
//! stage needs do not fit the cluster's slots, every stage moves to the fewest threads per
//! replica (C ∈ choices, at least the most any stage runs now) at which they do, or to CPU_max.
//! One thread count for all stages keeps the critical flow carried evenly; the paper only
//! compensates replicas the smoother took back, which never happens below what queueing needs.

/// The thread count all stages should run, when `needs_at(C)` (the stages' needs at C threads)
/// exceeds `slots` at the current threads; `None` when the needs fit as they are.
pub fn threads_to_fit(
    current: u16,
    choices: &[u16],
    slots: u32,
    needs_at: impl Fn(u16) -> Vec<u32>,
) -> Option<u16> {
    let fits = |threads: u16| needs_at(threads).iter().sum::<u32>() <= slots;
    if fits(current) {
        return None;
    }
    let mut options: Vec<u16> = choices.iter().copied().filter(|&c| c > current).collect();
    options.sort_unstable();
    options.iter().copied().find(|&c| fits(c)).or(options.last().copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Four stages of s(C) = 5 + 5/C ms at 250 req/s need ⌈250·s⌉ + 1 replicas each.
    fn needs(threads: u16) -> Vec<u32> {
        let s = (5.0 + 5.0 / f64::from(threads)) / 1e3;
        vec![(250.0 * s).ceil() as u32 + 1; 4]
    }

    #[test]
    fn the_fewest_threads_at_which_the_needs_fit() {
        // 1 thread: 4 each (16); 2 threads: 3 each (12); 4 threads: 3 each.
        assert_eq!(threads_to_fit(1, &[1, 2, 4, 8], 16, needs), None, "fits already");
        assert_eq!(threads_to_fit(1, &[1, 2, 4, 8], 12, needs), Some(2));
        assert_eq!(threads_to_fit(1, &[1, 2, 4], 8, needs), Some(4), "none fits: CPU_max");
        assert_eq!(threads_to_fit(4, &[1, 2, 4], 8, needs), None, "at CPU_max already");
    }
}
