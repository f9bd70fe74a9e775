//! A period's launches placed together so that as many as possible start warm (QUART §6.2's
//! cache-aware scheduling, for a burst that asks for many replicas at once). Placed one stage at
//! a time, the first stages take the free slots beside their cached parameters that the last
//! stages needed, and those start cold (a stage's share of the whole model's load, 5.6 s in the
//! shipped scenarios, against 0.8 s warm). A maximum matching of launches to free slots, an
//! edge wherever the slot's host holds the stage's parameters, starts every launch warm that
//! any placement could.

use morph_core::HostId;

/// One stage's launches this period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Wanted {
    pub stage: u16,
    pub launches: u32,
    pub threads: u16,
    /// Whether they are key-stage replicas (placed apart from each other).
    pub key: bool,
}

/// How a replica of a stage would start on a host, surest warm start first: the stage has run
/// there, or it was preloaded there (warm once the host's load is done, which the policy is not
/// told), or neither (cold).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Warmth {
    Ran,
    Preloaded,
    Cold,
}

/// The free slots on hosts and which stages each host can start warm.
pub(super) trait WarmSlots {
    /// Hosts, in the order a launch of `want`'s stage prefers them, that hold its parameters as
    /// `warmth` says and could take it now.
    fn warm_hosts(&self, want: &Wanted, warmth: Warmth) -> Vec<usize>;
    /// Free slots on `host`.
    fn free_on(&self, host: usize) -> u16;
}

/// For each of `wants` (in priority order), the hosts its warm launches go to: a maximum
/// matching of launches to free slots beside hosts where the stage has run (Kuhn's augmenting
/// paths), then of the launches left to the slots left beside preloaded ones. Where not
/// every launch can start warm, the earlier wants keep theirs: a launch once matched stays
/// matched. Launches without a host here start wherever the placement rule puts them.
pub(super) fn match_warm(slots: &impl WarmSlots, wants: &[Wanted]) -> Vec<Vec<HostId>> {
    let mut out = vec![Vec::new(); wants.len()];
    let mut taken: Vec<u16> = Vec::new();
    for warmth in [Warmth::Ran, Warmth::Preloaded] {
        // Left: one node per launch still unplaced; right: one node per slot still free.
        let launches: Vec<usize> = wants
            .iter()
            .enumerate()
            .flat_map(|(w, want)| std::iter::repeat_n(w, want.launches as usize - out[w].len()))
            .collect();
        let mut slot_host: Vec<usize> = Vec::new();
        let mut first_slot: Vec<Option<(usize, usize)>> = Vec::new();
        let mut edges: Vec<Vec<usize>> = Vec::with_capacity(launches.len());
        for &w in &launches {
            let mut adjacent = Vec::new();
            for host in slots.warm_hosts(&wants[w], warmth) {
                if first_slot.len() <= host {
                    first_slot.resize(host + 1, None);
                    taken.resize(host + 1, 0);
                }
                let (first, free) = *first_slot[host].get_or_insert_with(|| {
                    let free = usize::from(slots.free_on(host).saturating_sub(taken[host]));
                    slot_host.extend(std::iter::repeat_n(host, free));
                    (slot_host.len() - free, free)
                });
                adjacent.extend(first..first + free);
            }
            edges.push(adjacent);
        }
        let mut owner: Vec<Option<usize>> = vec![None; slot_host.len()];
        for launch in 0..launches.len() {
            let mut seen = vec![false; slot_host.len()];
            augment(launch, &edges, &mut seen, &mut owner);
        }
        for (slot, launch) in owner.iter().enumerate() {
            if let Some(launch) = launch {
                let host = slot_host[slot];
                out[launches[*launch]].push(HostId(host as u16));
                taken[host] += 1;
            }
        }
    }
    out
}

/// Kuhn's step: finds `launch` a free slot, moving matched launches along an alternating path.
fn augment(launch: usize, edges: &[Vec<usize>], seen: &mut [bool], owner: &mut [Option<usize>]) -> bool {
    for &slot in &edges[launch] {
        if seen[slot] {
            continue;
        }
        seen[slot] = true;
        if owner[slot].is_none_or(|other| augment(other, edges, seen, owner)) {
            owner[slot] = Some(launch);
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hosts with free slots, the stages each has run and those preloaded there.
    struct Hosts(Vec<(u16, Vec<u16>, Vec<u16>)>);

    impl WarmSlots for Hosts {
        fn warm_hosts(&self, want: &Wanted, warmth: Warmth) -> Vec<usize> {
            let holds = |h: &(u16, Vec<u16>, Vec<u16>)| match warmth {
                Warmth::Ran => h.1.contains(&want.stage),
                Warmth::Preloaded => h.2.contains(&want.stage),
                Warmth::Cold => false,
            };
            (0..self.0.len()).filter(|&h| self.0[h].0 > 0 && holds(&self.0[h])).collect()
        }

        fn free_on(&self, host: usize) -> u16 {
            self.0[host].0
        }
    }

    fn want(stage: u16, launches: u32) -> Wanted {
        Wanted { stage, launches, threads: 1, key: false }
    }

    #[test]
    fn the_first_stage_leaves_the_slot_only_the_second_can_start_warm_in() {
        // Host 0 caches stages 0 and 1, host 1 only stage 0; one free slot each. Placed one
        // stage at a time, stage 0 takes host 0 (its preferred) and stage 1 starts cold.
        let hosts = Hosts(vec![(1, vec![0, 1], vec![]), (1, vec![0], vec![])]);
        let matched = match_warm(&hosts, &[want(0, 1), want(1, 1)]);
        assert_eq!(matched, vec![vec![HostId(1)], vec![HostId(0)]]);
    }

    #[test]
    fn where_not_all_can_start_warm_the_earlier_wants_keep_theirs() {
        let hosts = Hosts(vec![(2, vec![0, 1], vec![])]);
        let matched = match_warm(&hosts, &[want(1, 2), want(0, 2)]);
        assert_eq!(matched, vec![vec![HostId(0), HostId(0)], vec![]]);
        // A host's free slots bound its warm launches; nothing cached, nothing matched.
        let matched = match_warm(&Hosts(vec![(1, vec![0], vec![]), (3, vec![], vec![])]), &[want(0, 3)]);
        assert_eq!(matched, vec![vec![HostId(0)]]);
    }

    #[test]
    fn hosts_a_stage_has_run_on_are_matched_before_hosts_it_was_preloaded_on() {
        // Host 0 has run stage 1 and had stage 0 preloaded; host 1 has run stage 0. Stage 0's
        // two launches: one where it ran, one on host 0's preload; stage 1's launch keeps host
        // 0's second slot, where it ran.
        let hosts = Hosts(vec![(2, vec![1], vec![0]), (1, vec![0], vec![])]);
        let matched = match_warm(&hosts, &[want(0, 2), want(1, 1)]);
        assert_eq!(matched, vec![vec![HostId(1), HostId(0)], vec![HostId(0)]]);
    }
}
