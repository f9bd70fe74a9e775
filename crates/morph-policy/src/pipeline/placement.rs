//! Where a new replica goes (QUART §6.2): hosts (the paper's hosts) × slots, with what the
//! policy knows of each host (slots held, key-stage replicas, stages whose parameters it has loaded, so its host
//! cache may hold them).

use std::collections::BTreeSet;

use morph_core::{HostId, HostSlots};
use serde::{Deserialize, Serialize};

use super::warm_match::{Wanted, WarmSlots, Warmth};

/// The placement rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlacementRule {
    /// The first host with a free slot.
    FirstFit,
    /// QUART's rule made deterministic (spec §1.8 [R]): key stages cache-aware and dispersed,
    /// the rest best-fit away from key stages, `reserve` slots kept free next to key stages.
    CacheAware,
    /// The paper-literal ablation: a host drawn with probability ∝ its free slots (the
    /// minimiser of Eq. 8's KL to uniform, sampled as the authors' code does).
    KlRandom,
}

/// What the policy knows of every host.
#[derive(Debug, Clone)]
pub struct ClusterView {
    capacity: Vec<u16>,
    used: Vec<u16>,
    /// Cores per host (`None`: unbounded), and the threads its replicas hold.
    cores: Vec<Option<u16>>,
    threads: Vec<u32>,
    key_replicas: Vec<u16>,
    /// Stages (by index) loaded on each host at some point.
    loaded: Vec<BTreeSet<u16>>,
    /// Stages asked to be preloaded on each host: cached once the host has loaded them, which
    /// the policy is not told, so they rank after `loaded`.
    preloaded: Vec<BTreeSet<u16>>,
    /// xorshift state for `KlRandom`.
    rng: u64,
}

impl ClusterView {
    pub fn new(hosts: &HostSlots) -> Self {
        let n = hosts.slots.len();
        Self {
            capacity: hosts.slots.clone(),
            used: vec![0; n],
            cores: (0..n).map(|i| hosts.cores_of(i)).collect(),
            threads: vec![0; n],
            key_replicas: vec![0; n],
            loaded: vec![BTreeSet::new(); n],
            preloaded: vec![BTreeSet::new(); n],
            rng: 0x9E37_79B9_7F4A_7C15,
        }
    }

    fn free(&self, s: usize) -> u16 {
        self.capacity[s].saturating_sub(self.used[s])
    }

    /// Whether host `s` has a free slot and `threads` free cores.
    fn fits(&self, s: usize, threads: u16) -> bool {
        self.free(s) > 0 && self.cores[s].is_none_or(|c| self.threads[s] + u32::from(threads) <= u32::from(c))
    }

    /// The cores of every host together, if each is bounded.
    pub fn total_cores(&self) -> Option<usize> {
        self.cores.iter().map(|c| c.map(usize::from)).sum()
    }

    /// How a replica of `stage` would start on host `s`.
    fn warmth(&self, s: usize, stage: u16) -> Warmth {
        match (self.loaded[s].contains(&stage), self.preloaded[s].contains(&stage)) {
            (true, _) => Warmth::Ran,
            (false, true) => Warmth::Preloaded,
            (false, false) => Warmth::Cold,
        }
    }

    /// Device slots on every host together.
    pub fn total_slots(&self) -> usize {
        self.capacity.iter().map(|&c| usize::from(c)).sum()
    }

    /// `host` has `slots` now (0: it left); a host past the known ones joined.
    pub fn set_slots(&mut self, host: HostId, slots: u16) {
        let s = usize::from(host.0);
        if s >= self.capacity.len() {
            let n = s + 1;
            self.capacity.resize(n, 0);
            self.used.resize(n, 0);
            self.cores.resize(n, None);
            self.threads.resize(n, 0);
            self.key_replicas.resize(n, 0);
            self.loaded.resize(n, BTreeSet::new());
            self.preloaded.resize(n, BTreeSet::new());
        }
        self.capacity[s] = slots;
    }

    pub fn free_slots(&self) -> usize {
        (0..self.capacity.len()).map(|s| usize::from(self.free(s))).sum()
    }

    /// A replica of `stage` holds a slot on `host` (launching or up).
    pub fn hold(&mut self, host: HostId, stage: u16, key: bool, threads: u16) {
        let s = usize::from(host.0);
        if s >= self.capacity.len() {
            return;
        }
        self.used[s] += 1;
        self.threads[s] += u32::from(threads);
        self.key_replicas[s] += u16::from(key);
        self.loaded[s].insert(stage);
    }

    pub fn release(&mut self, host: HostId, key: bool, threads: u16) {
        let s = usize::from(host.0);
        if s < self.capacity.len() {
            self.used[s] = self.used[s].saturating_sub(1);
            self.threads[s] = self.threads[s].saturating_sub(u32::from(threads));
            self.key_replicas[s] = self.key_replicas[s].saturating_sub(u16::from(key));
        }
    }

    /// The host for a new replica of `stage` under `rule`; `None` when no slot is free.
    pub fn place(
        &mut self,
        rule: PlacementRule,
        stage: u16,
        key: bool,
        reserve: u16,
        threads: u16,
    ) -> Option<HostId> {
        let open: Vec<usize> = (0..self.capacity.len()).filter(|&s| self.fits(s, threads)).collect();
        let chosen = match rule {
            PlacementRule::FirstFit => open.first().copied(),
            PlacementRule::KlRandom => self.draw(&open),
            PlacementRule::CacheAware if key => open.iter().copied().min_by_key(|&s| {
                // Cached first, then the fewest key replicas (the smallest KL of the key-stage
                // distribution to uniform), then the most free slots, then the lowest id.
                (self.warmth(s, stage), self.key_replicas[s], u16::MAX - self.free(s), s)
            }),
            PlacementRule::CacheAware => {
                // Cached first (a warm start is seconds sooner for any stage); else where the
                // fewest other stages are cached, keeping the room beside them for their own
                // warm starts; then best fit, away from key stages, leaving `reserve` slots free
                // next to them.
                let allowed = |s: &usize| self.key_replicas[*s] == 0 || self.free(*s) > reserve;
                let best = |s: &usize| {
                    let warmth = self.warmth(*s, stage);
                    let others = if warmth == Warmth::Cold { self.loaded[*s].len() } else { 0 };
                    (warmth, others, self.key_replicas[*s] > 0, self.free(*s), *s)
                };
                open.iter()
                    .copied()
                    .filter(allowed)
                    .min_by_key(best)
                    .or_else(|| open.iter().copied().min_by_key(best))
            }
        };
        chosen.map(|s| HostId(s as u16))
    }

    /// Every (host, stage) of `stages` neither loaded nor preloaded yet, marked preloaded, in the
    /// order to load them: in rounds, each host with slots takes the stage it lacks that the
    /// fewest hosts hold (then the lowest index), so that early in the loading every stage is on
    /// some hosts.
    pub fn preload_all(&mut self, stages: u16) -> Vec<(HostId, u16)> {
        let hosts = 0..self.capacity.len();
        let mut held: Vec<usize> = (0..stages)
            .map(|stage| hosts.clone().filter(|&s| self.warmth(s, stage) != Warmth::Cold).count())
            .collect();
        let mut out = Vec::new();
        loop {
            let before = out.len();
            for s in hosts.clone().filter(|&s| self.capacity[s] > 0) {
                let lacking = (0..stages).filter(|&stage| self.warmth(s, stage) == Warmth::Cold);
                if let Some(stage) = lacking.min_by_key(|&stage| (held[usize::from(stage)], stage)) {
                    held[usize::from(stage)] += 1;
                    self.preloaded[s].insert(stage);
                    out.push((HostId(s as u16), stage));
                }
            }
            if out.len() == before {
                return out;
            }
        }
    }

    /// Whether host `host` could take a replica at `threads` now.
    pub fn fits_on(&self, host: HostId, threads: u16) -> bool {
        usize::from(host.0) < self.capacity.len() && self.fits(usize::from(host.0), threads)
    }

    fn draw(&mut self, open: &[usize]) -> Option<usize> {
        let total: u64 = open.iter().map(|&s| u64::from(self.free(s))).sum();
        if total == 0 {
            return None;
        }
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let mut pick = self.rng % total;
        for &s in open {
            let f = u64::from(self.free(s));
            if pick < f {
                return Some(s);
            }
            pick -= f;
        }
        open.last().copied()
    }
}

impl WarmSlots for ClusterView {
    /// The cache-aware rule's order among the hosts that hold the stage: a key replica where
    /// the fewest key replicas are and the most room, the rest best fit away from key stages.
    fn warm_hosts(&self, want: &Wanted, warmth: Warmth) -> Vec<usize> {
        let mut hosts: Vec<usize> = (0..self.capacity.len())
            .filter(|&s| self.warmth(s, want.stage) == warmth && self.fits(s, want.threads))
            .collect();
        match want.key {
            true => hosts.sort_by_key(|&s| (self.key_replicas[s], u16::MAX - self.free(s), s)),
            false => hosts.sort_by_key(|&s| (self.key_replicas[s] > 0, self.free(s), s)),
        }
        hosts
    }

    fn free_on(&self, host: usize) -> u16 {
        self.free(host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicas_go_where_they_are_cached_key_ones_spread_and_the_rest_fill_tightly() {
        let mut view = ClusterView::new(&HostSlots::new(3, 4));
        // Host 0 holds two plain replicas, host 1 one key replica of stage 5.
        view.hold(HostId(0), 1, false, 1);
        view.hold(HostId(0), 2, false, 1);
        view.hold(HostId(1), 5, true, 1);
        // A key replica of stage 5: host 1 has it cached.
        assert_eq!(view.place(PlacementRule::CacheAware, 5, true, 1, 1), Some(HostId(1)));
        // A key replica of an uncached stage: the host with no key replicas and most room.
        assert_eq!(view.place(PlacementRule::CacheAware, 7, true, 1, 1), Some(HostId(2)));
        // A plain replica of a stage cached on host 0: there, to start warm.
        assert_eq!(view.place(PlacementRule::CacheAware, 1, false, 1, 1), Some(HostId(0)));
        // A plain replica cached nowhere: not beside other stages' cached parameters (their
        // room is for their own warm starts).
        assert_eq!(view.place(PlacementRule::CacheAware, 3, false, 1, 1), Some(HostId(2)));
        assert_eq!(view.place(PlacementRule::FirstFit, 3, false, 1, 1), Some(HostId(0)));
        // With stages cached everywhere: best fit on the fullest host among the fewest cached.
        view.hold(HostId(2), 6, false, 1);
        assert_eq!(view.place(PlacementRule::CacheAware, 3, false, 1, 1), Some(HostId(2)));
    }

    #[test]
    fn a_host_a_stage_has_run_on_comes_before_one_it_was_preloaded_on() {
        let mut view = ClusterView::new(&HostSlots::new(3, 4));
        view.hold(HostId(2), 0, false, 1);
        view.release(HostId(2), false, 1);
        assert_eq!(view.preload_all(1), [(HostId(0), 0), (HostId(1), 0)]);
        for key in [false, true] {
            assert_eq!(view.place(PlacementRule::CacheAware, 0, key, 1, 1), Some(HostId(2)), "key {key}");
        }
        // A stage neither ran nor was preloaded anywhere: cold wherever it goes.
        assert_eq!(view.place(PlacementRule::CacheAware, 1, false, 1, 1), Some(HostId(0)));
    }

    #[test]
    fn plain_replicas_leave_the_reserve_next_to_key_stages_while_they_can() {
        let mut view = ClusterView::new(&HostSlots::new(2, 2));
        view.hold(HostId(0), 0, true, 1);
        view.hold(HostId(1), 1, false, 1);
        // Host 0 has one free slot, the reserve: the plain replica takes host 1.
        assert_eq!(view.place(PlacementRule::CacheAware, 2, false, 1, 1), Some(HostId(1)));
        view.hold(HostId(1), 2, false, 1);
        // Only the reserve is left: it is used rather than refusing.
        assert_eq!(view.place(PlacementRule::CacheAware, 2, false, 1, 1), Some(HostId(0)));
        view.hold(HostId(0), 2, false, 1);
        assert_eq!(view.place(PlacementRule::CacheAware, 2, false, 1, 1), None);
        assert_eq!(view.free_slots(), 0);
    }

    #[test]
    fn kl_random_draws_only_servers_with_room() {
        let mut view = ClusterView::new(&HostSlots::new(3, 1));
        view.hold(HostId(1), 0, false, 1);
        for _ in 0..50 {
            assert_ne!(view.place(PlacementRule::KlRandom, 0, true, 0, 1), Some(HostId(1)));
        }
    }

    #[test]
    fn a_server_that_leaves_gets_no_replica_and_one_that_joins_later_does() {
        let mut view = ClusterView::new(&HostSlots::new(2, 2));
        view.hold(HostId(1), 3, true, 1);
        assert_eq!(view.place(PlacementRule::CacheAware, 3, true, 0, 1), Some(HostId(1)), "cached there");
        view.set_slots(HostId(1), 0);
        for rule in [PlacementRule::CacheAware, PlacementRule::FirstFit, PlacementRule::KlRandom] {
            assert_eq!(view.place(rule, 3, true, 0, 1), Some(HostId(0)), "{rule:?}: host 1 left");
        }
        assert_eq!(view.total_slots(), 2);
        // Its replica's slot is given back as the replica is lost.
        view.release(HostId(1), true, 1);
        view.hold(HostId(0), 0, false, 1);
        view.hold(HostId(0), 1, false, 1);
        assert_eq!(view.place(PlacementRule::FirstFit, 2, false, 0, 1), None, "the one host left is full");
        view.set_slots(HostId(3), 4);
        assert_eq!(view.total_slots(), 6);
        assert_eq!(
            view.place(PlacementRule::FirstFit, 2, false, 0, 1),
            Some(HostId(3)),
            "a host that joined"
        );
        view.set_slots(HostId(1), 2);
        assert_eq!(view.place(PlacementRule::CacheAware, 3, true, 0, 1), Some(HostId(1)), "back, cached");
    }
}
