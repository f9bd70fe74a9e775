//! The simulated hosts: device slots per host, and each host's memory parameter cache
//! (QUART's KeysManager, §6.1): parameters of every unit loaded there stay in memory, evicted
//! least recently used once they pass 85% of the budget. A launch whose unit is cached on its
//! host starts warm; otherwise cold.

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
    /// (parameters, bytes, last used), least recently used first after `touch`.
    cache: Vec<(UnitSpec, u64, Time)>,
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

    /// Whether `unit`'s parameters are in `host`'s host memory (a warm start); counts it.
    pub(crate) fn start(&mut self, host: HostId, unit: &UnitSpec, cache_on: bool) -> bool {
        let k = key(unit);
        let warm =
            cache_on && self.hosts.get(usize::from(host.0)).is_some_and(|h| h.cache.iter().any(|e| e.0 == k));
        if warm {
            self.warm += 1
        } else {
            self.cold += 1
        }
        warm
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
