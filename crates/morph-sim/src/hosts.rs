//! The simulated hosts: device slots per host, and each host's memory parameter cache
//! (QUART's KeysManager, §6.1): parameters of every unit loaded there stay in memory, evicted
//! least recently used once they pass 85% of the budget. A launch whose unit is cached on its
//! host starts warm; otherwise cold. A preload loads a unit into the cache without a slot, one
//! at a time per host, each in a cold start's time.

use morph_core::{HostId, HostSlots, Nanos, Time, UnitSpec};

use crate::cost::Startup;

/// QUART §6.1: the watchdog evicts above 85% memory use.
const EVICT_ABOVE: f64 = 0.85;

/// A host's slots, cores and cache.
#[derive(Debug)]
struct Host {
    slots: u16,
    used: u16,
    /// Cores for the threads of its instances (`None`: unbounded), and those held.
    cores: Option<u16>,
    threads: u32,
    /// (parameters, bytes, last used), least recently used first after `touch`; an entry whose
    /// time is still to come is being preloaded.
    cache: Vec<(UnitSpec, u64, Time)>,
    /// When its last preload ends.
    loading_until: Time,
}

impl Host {
    /// A free slot and `threads` free cores.
    fn has_room(&self, threads: u32) -> bool {
        self.used < self.slots && self.cores.is_none_or(|c| self.threads + threads <= u32::from(c))
    }
}

/// The parameters a unit needs, whatever its thread count.
fn key(unit: &UnitSpec) -> UnitSpec {
    UnitSpec { threads: None, ..*unit }
}

#[derive(Debug)]
pub(crate) struct Hosts {
    hosts: Vec<Host>,
    cache_bytes: u64,
    pub(crate) cold: usize,
    pub(crate) warm: usize,
    pub(crate) evicted: usize,
}

impl Hosts {
    pub(crate) fn new(hosts: &HostSlots, cache_bytes: u64) -> Self {
        let hosts = hosts
            .slots
            .iter()
            .enumerate()
            .map(|(i, &slots)| Host {
                slots,
                used: 0,
                cores: hosts.cores_of(i),
                threads: 0,
                cache: Vec::new(),
                loading_until: Time::ZERO,
            })
            .collect();
        Self { hosts, cache_bytes, cold: 0, warm: 0, evicted: 0 }
    }

    /// Takes a slot and `threads` cores on `want` (or the first host with both free); why not,
    /// if none has them.
    pub(crate) fn take(&mut self, want: Option<HostId>, threads: u32) -> Result<HostId, String> {
        let index = match want {
            Some(s) => {
                let host = self.hosts.get(usize::from(s.0)).ok_or_else(|| format!("no host {s}"))?;
                if host.used >= host.slots {
                    return Err(format!("host {s} has no free slot ({} of {} used)", host.used, host.slots));
                }
                if !host.has_room(threads) {
                    let cores = host.cores.unwrap_or_default();
                    return Err(format!(
                        "host {s} has no {threads} free cores ({} of {cores} held)",
                        host.threads
                    ));
                }
                usize::from(s.0)
            }
            None => self
                .hosts
                .iter()
                .position(|h| h.has_room(threads))
                .ok_or("no host has a free slot and the cores")?,
        };
        self.hosts[index].used += 1;
        self.hosts[index].threads += threads;
        Ok(HostId(index as u16))
    }

    /// The host the `i`-th instance of a spread layout goes to: host `i` modulo their number, or
    /// the next one after it with a free slot and `threads` free cores.
    pub(crate) fn spread(&self, i: usize, threads: u32) -> Option<HostId> {
        let n = self.hosts.len();
        (0..n).map(|k| (i + k) % n).find(|&h| self.hosts[h].has_room(threads)).map(|h| HostId(h as u16))
    }

    /// Gives back a slot and `threads` cores on `host`.
    pub(crate) fn free(&mut self, host: HostId, threads: u32) {
        if let Some(h) = self.hosts.get_mut(usize::from(host.0)) {
            h.used = h.used.saturating_sub(1);
            h.threads = h.threads.saturating_sub(threads);
        }
    }

    /// How a launch of `unit` on `host` at `now` starts, taking `cold` or `warm`: with the cache
    /// on, warm where its parameters are in the host's memory, or once a preload of them ends if
    /// that is no later than a cold start; counts it. Whether warm, and how long it takes.
    pub(crate) fn start(
        &mut self,
        host: HostId,
        unit: &UnitSpec,
        now: Time,
        cache_on: bool,
        took: Startup,
    ) -> (bool, Nanos) {
        let k = key(unit);
        let cached = self.hosts.get(usize::from(host.0)).and_then(|h| h.cache.iter().find(|e| e.0 == k));
        let loaded_at = cached.filter(|_| cache_on).map(|e| e.2);
        let from_memory =
            loaded_at.map(|t| t.0.saturating_sub(now.0) + took.warm).filter(|&t| t <= took.cold);
        match from_memory {
            Some(took) => {
                self.warm += 1;
                (true, took)
            }
            None => {
                self.cold += 1;
                (false, took.cold)
            }
        }
    }

    /// Loads `unit` into `host`'s memory after the host's earlier preloads, taking `took`; a unit
    /// already there (or on its way) is not loaded again. Whether it loads.
    pub(crate) fn preload(
        &mut self,
        host: HostId,
        unit: &UnitSpec,
        bytes: u64,
        now: Time,
        took: Nanos,
    ) -> bool {
        let k = key(unit);
        let Some(h) = self.hosts.get_mut(usize::from(host.0)) else { return false };
        if h.cache.iter().any(|e| e.0 == k) {
            return false;
        }
        h.loading_until = Time(h.loading_until.0.max(now.0) + took);
        let done = h.loading_until;
        self.loaded(host, unit, bytes, done);
        true
    }

    /// `unit` was loaded on `host` at `now`: its parameters stay cached (LRU above 85%).
    pub(crate) fn loaded(&mut self, host: HostId, unit: &UnitSpec, bytes: u64, now: Time) {
        let budget = self.cache_bytes;
        let Some(h) = self.hosts.get_mut(usize::from(host.0)) else { return };
        let k = key(unit);
        h.cache.retain(|e| e.0 != k);
        h.cache.push((k, bytes, now));
        h.cache.sort_by_key(|e| e.2);
        let limit = (budget as f64 * EVICT_ABOVE) as u64;
        while h.cache.len() > 1 && h.cache.iter().map(|e| e.1).sum::<u64>() > limit {
            h.cache.remove(0);
            self.evicted += 1;
        }
    }
}

/// The start-up time of `unit`: the whole model's cold or warm time times its share of the
/// model's layers.
pub(crate) fn startup_time(startup: &Startup, warm: bool, share: f64) -> Nanos {
    let whole = if warm { startup.warm } else { startup.cold };
    (whole as f64 * share).round() as Nanos
}

#[cfg(test)]
mod tests {
    use morph_core::RuntimeSpec;

    use super::*;

    #[test]
    fn a_host_holds_threads_within_its_cores() {
        let mut hosts = Hosts::new(&HostSlots::new(2, 4).with_cores(8), u64::MAX);
        let first = hosts.take(Some(HostId(0)), 4).unwrap();
        hosts.take(Some(HostId(0)), 4).unwrap();
        let why = hosts.take(Some(HostId(0)), 1).unwrap_err();
        assert!(why.contains("no 1 free cores (8 of 8 held)"), "{why}");
        assert_eq!(hosts.take(None, 8), Ok(HostId(1)), "the next host with the cores");
        assert!(hosts.take(None, 1).is_err(), "every core held, slots free");
        hosts.free(first, 4);
        assert_eq!(hosts.take(None, 4), Ok(HostId(0)));
    }

    const S: Nanos = 1_000_000_000;

    #[test]
    fn a_preload_makes_a_later_launch_warm_and_a_host_loads_one_unit_at_a_time() {
        let mut hosts = Hosts::new(&HostSlots::new(2, 4), u64::MAX);
        let (a, b) =
            (UnitSpec::batch(RuntimeSpec::dynamic(128, 1)), UnitSpec::batch(RuntimeSpec::dynamic(512, 1)));
        let took = Startup { cold: 5 * S, warm: S };
        assert!(hosts.preload(HostId(0), &a, 1, Time::ZERO, 5 * S));
        assert!(hosts.preload(HostId(0), &b, 1, Time::ZERO, 5 * S), "after a: loaded at 10 s");
        assert!(!hosts.preload(HostId(0), &a, 1, Time(S), 5 * S), "already on its way");
        // At 6 s a is in memory: warm. b's load ends at 10 s: waiting for it and starting warm
        // (5 s) is no later than a cold start (5 s).
        assert_eq!(hosts.start(HostId(0), &a, Time(6 * S), true, took), (true, S));
        assert_eq!(hosts.start(HostId(0), &b, Time(6 * S), true, took), (true, 5 * S));
        // At 2 s, b would be 9 s away warm: cold is sooner.
        assert_eq!(hosts.start(HostId(0), &b, Time(2 * S), true, took), (false, 5 * S));
        // Another host, or the cache off: cold.
        assert_eq!(hosts.start(HostId(1), &a, Time(6 * S), true, took), (false, 5 * S));
        assert_eq!(hosts.start(HostId(0), &a, Time(6 * S), false, took), (false, 5 * S));
        assert_eq!((hosts.warm, hosts.cold), (2, 3));
    }

    #[test]
    fn a_spread_layout_goes_one_per_host_in_turn_past_full_ones() {
        let mut hosts = Hosts::new(&HostSlots::new(3, 1), u64::MAX);
        assert_eq!(hosts.spread(4, 1), Some(HostId(1)), "4 modulo 3");
        hosts.take(Some(HostId(1)), 1).unwrap();
        assert_eq!(hosts.spread(4, 1), Some(HostId(2)), "host 1 is full: the next");
        hosts.take(Some(HostId(2)), 1).unwrap();
        hosts.take(Some(HostId(0)), 1).unwrap();
        assert_eq!(hosts.spread(0, 1), None);
    }
}
