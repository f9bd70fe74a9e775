//! The CPU compensator when slots run out (Morph's extension of §5.3): when the replicas every
//! stage needs do not fit the cluster's slots (or its cores), every stage moves to the thread
//! count (C ∈ choices) at which they fit on the fewest cores. When no count fits (an overload
//! no thread count absorbs) the stages stay as they are: re-threading a full cluster retires a
//! replica before its successor starts, which takes capacity away in the burst. One thread
//! count for all stages keeps the critical flow carried evenly; the paper only compensates
//! replicas the smoother took back, which never happens below what queueing needs. Threads
//! cost cores, so a count above what the needs call for comes back down once a cheaper one
//! fits.

/// The cluster a thread count must fit: its slots, and its cores if they are bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub slots: u32,
    pub cores: Option<u32>,
}

impl Budget {
    /// Whether `needs` replicas of `threads` threads each fit.
    fn fits(&self, needs: &[u32], threads: u16) -> bool {
        let replicas: u32 = needs.iter().sum();
        replicas <= self.slots && self.cores.is_none_or(|c| replicas * u32::from(threads) <= c)
    }
}

/// The thread count all stages should run, given `needs_at(C)` (the stages' needs at C
/// threads): the count at which the needs fit on the fewest cores, if that is not `current`
/// (which is kept on a tie); `None` to stay, also when no count fits.
pub fn threads_to_fit(
    current: u16,
    choices: &[u16],
    budget: Budget,
    needs_at: impl Fn(u16) -> Vec<u32>,
) -> Option<u16> {
    let cost = |threads: u16| needs_at(threads).iter().sum::<u32>() * u32::from(threads);
    let fits = |threads: u16| budget.fits(&needs_at(threads), threads);
    let best = choices.iter().copied().filter(|&c| fits(c)).min_by_key(|&c| (cost(c), c))?;
    let keep = fits(current) && cost(current) <= cost(best);
    (!keep && best != current).then_some(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Four stages of s(C) = 5 + 5/C ms at 250 req/s need ⌈250·s⌉ + 1 replicas each.
    fn needs(threads: u16) -> Vec<u32> {
        let s = (5.0 + 5.0 / f64::from(threads)) / 1e3;
        vec![(250.0 * s).ceil() as u32 + 1; 4]
    }

    fn slots(slots: u32) -> Budget {
        Budget { slots, cores: None }
    }

    #[test]
    fn the_count_that_fits_on_the_fewest_cores() {
        // 1 thread: 4 each (16 replicas, 16 cores); 2 threads: 3 each (12, 24 cores); 4: 3 each.
        assert_eq!(threads_to_fit(1, &[1, 2, 4, 8], slots(16), needs), None, "fits already");
        assert_eq!(threads_to_fit(1, &[1, 2, 4, 8], slots(12), needs), Some(2));
        assert_eq!(threads_to_fit(1, &[1, 2, 4], slots(8), needs), None, "none fits: stay");
        assert_eq!(threads_to_fit(4, &[1, 2, 4, 8], slots(16), needs), Some(1), "back down when 1 fits");
        // Cores bound: 12 slots, 20 cores. 2 threads need 24 cores and 1 thread 16 slots:
        // nothing fits, stay; with 24 cores, 2 threads fit.
        assert_eq!(threads_to_fit(1, &[1, 2, 4], Budget { slots: 12, cores: Some(20) }, needs), None);
        assert_eq!(threads_to_fit(1, &[1, 2, 4], Budget { slots: 12, cores: Some(24) }, needs), Some(2));
    }
}
