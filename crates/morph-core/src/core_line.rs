//! The line for a host's cores, shared by the models of one server, as pure bookkeeping in
//! [`Time`]: the live server's budget (`morph_engine::CoreBudget`, on the wall clock) and the
//! simulator's shared host (in virtual time) both keep it, so that both grant cores alike.
//!
//! A computation (an encoder batch, a decoder step) runs only while it holds as many cores as
//! it has threads, so never more threads compute at once than the host has cores, and an idle
//! instance holds none. Waiters are served earliest deadline first: a waiter's deadline is when
//! it began to wait plus its model's *slack* (which the core controller sets from each model's
//! load and SLO). A waiter that is first but finds too few cores free lets later ones that fit
//! run on them while its deadline is ahead (backfilling), and holds the others back once it has
//! passed, so an instance of many threads is never starved by one-core ones. Time passing alone
//! never lets a waiter run (it only makes the line stricter), so cores are granted only when a
//! waiter arrives or cores come back.

use std::collections::BTreeMap;

use crate::time::{Nanos, Time};

/// Cores as a count: a host's, or what one computation holds.
pub type Cores = u16;

/// One model's account in a [`CoreLine`].
#[derive(Debug, Clone, PartialEq)]
pub struct ModelCores {
    /// How long its computations may wait for cores before a later one of another model with
    /// more slack left goes first.
    pub slack: Nanos,
    /// Cores its instances hold now.
    pub held: Cores,
    /// Its computations waiting for cores now.
    pub waiting: usize,
    /// Core-seconds its computations have held since the start, those computing now included
    /// (up to the last [`CoreLine::accounts`]).
    pub core_seconds: f64,
    /// Computations it was granted cores for.
    pub grants: u64,
    /// When `held` last changed (`core_seconds` counts up to it).
    changed: Time,
}

impl ModelCores {
    /// Adds the core-seconds held since the last change, up to `now`.
    fn count_to(&mut self, now: Time) {
        self.core_seconds += f64::from(self.held) * now.since(self.changed) as f64 / 1e9;
        self.changed = self.changed.max(now);
    }
}

/// A waiter's place in line: its deadline, then its ticket (first come among equal deadlines).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Place {
    pub deadline: Time,
    ticket: u64,
}

/// Who waits at a place, for how many cores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waiter {
    pub model: usize,
    pub threads: Cores,
}

/// A host's cores: what is free, every model's account, and the line of waiters.
#[derive(Debug, Clone)]
pub struct CoreLine {
    cores: Cores,
    free: Cores,
    models: Vec<ModelCores>,
    line: BTreeMap<Place, Waiter>,
    next_ticket: u64,
}

impl CoreLine {
    /// A line for `cores` cores (at least one).
    pub fn new(cores: Cores) -> Self {
        let cores = cores.max(1);
        Self { cores, free: cores, models: Vec::new(), line: BTreeMap::new(), next_ticket: 0 }
    }

    pub fn cores(&self) -> Cores {
        self.cores
    }

    /// Opens a model's account with its first slack; returns its index.
    pub fn open(&mut self, slack: Nanos, now: Time) -> usize {
        let account = ModelCores { slack, held: 0, waiting: 0, core_seconds: 0.0, grants: 0, changed: now };
        self.models.push(account);
        self.models.len() - 1
    }

    /// Sets `model`'s slack for the computations that begin to wait from now on.
    pub fn set_slack(&mut self, model: usize, slack: Nanos) {
        if let Some(account) = self.models.get_mut(model) {
            account.slack = slack;
        }
    }

    /// Every model's account, its core-seconds counted up to `now`, in the order they opened.
    pub fn accounts(&mut self, now: Time) -> &[ModelCores] {
        self.models.iter_mut().for_each(|account| account.count_to(now));
        &self.models
    }

    /// Puts `model`'s computation of `threads` threads (clamped to the host's cores) in line.
    pub fn wait(&mut self, model: usize, threads: Cores, now: Time) -> Place {
        let threads = threads.clamp(1, self.cores);
        let place = Place { deadline: now + self.models[model].slack, ticket: self.next_ticket };
        self.next_ticket += 1;
        self.line.insert(place, Waiter { model, threads });
        self.models[model].waiting += 1;
        place
    }

    /// Whether the waiter at `place` may take its cores now: they are free, and every waiter
    /// ahead of it can neither run on what is free nor has waited past its deadline.
    pub fn may_run(&self, place: Place, now: Time) -> bool {
        let Some(waiter) = self.line.get(&place) else { return false };
        if self.free < waiter.threads {
            return false;
        }
        self.line.range(..place).all(|(ahead, w)| self.free < w.threads && ahead.deadline > now)
    }

    /// Gives the waiter at `place` its cores (the caller checked [`Self::may_run`]).
    pub fn take(&mut self, place: Place, now: Time) -> Waiter {
        let waiter = self.line.remove(&place).expect("a waiter in line");
        self.free -= waiter.threads;
        let account = &mut self.models[waiter.model];
        account.count_to(now);
        account.waiting -= 1;
        account.held += waiter.threads;
        account.grants += 1;
        waiter
    }

    /// Gives every waiter that may run its cores, in line order; returns them.
    pub fn take_ready(&mut self, now: Time) -> Vec<(Place, Waiter)> {
        let mut granted = Vec::new();
        while let Some(place) = self.line.keys().copied().find(|p| self.may_run(*p, now)) {
            granted.push((place, self.take(place, now)));
        }
        granted
    }

    /// Whether nothing holds cores and nobody waits for them.
    pub fn idle(&self) -> bool {
        self.free == self.cores && self.line.is_empty()
    }

    /// `model` gives back `threads` cores its computation held.
    pub fn give_back(&mut self, model: usize, threads: Cores, now: Time) {
        let threads = threads.clamp(1, self.cores);
        self.free += threads;
        let account = &mut self.models[model];
        account.count_to(now);
        account.held -= threads;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    fn at(ms: u64) -> Time {
        Time(ms * MS)
    }

    #[test]
    fn the_earliest_deadline_goes_first_and_a_wide_waiter_is_not_starved() {
        let mut line = CoreLine::new(2);
        let relaxed = line.open(60_000 * MS, at(0));
        let urgent = line.open(0, at(0));
        let blocker = line.wait(urgent, 2, at(0));
        line.take(blocker, at(0));
        let late = line.wait(relaxed, 1, at(1));
        let wide = line.wait(urgent, 2, at(2));
        assert!(line.take_ready(at(2)).is_empty(), "both cores are held");
        line.give_back(urgent, 2, at(10));
        // The urgent two-core step was asked for after the relaxed one and still runs first.
        let granted: Vec<Place> = line.take_ready(at(10)).into_iter().map(|(p, _)| p).collect();
        assert_eq!(granted, vec![wide]);
        line.give_back(urgent, 2, at(20));
        assert_eq!(line.take_ready(at(20)).into_iter().map(|(p, _)| p).collect::<Vec<_>>(), vec![late]);
        let accounts = line.accounts(at(30));
        assert_eq!(accounts.iter().map(|a| a.grants).collect::<Vec<_>>(), [1, 2]);
        assert!((accounts[urgent].core_seconds - 0.04).abs() < 1e-12, "{accounts:?}");
        assert!((accounts[relaxed].core_seconds - 0.01).abs() < 1e-12, "{accounts:?}");
    }

    #[test]
    fn a_narrow_waiter_backfills_around_a_wide_one_only_while_the_wide_one_has_slack() {
        let mut line = CoreLine::new(2);
        let wide = line.open(60_000 * MS, at(0));
        let narrow = line.open(120_000 * MS, at(0));
        let one_core = line.wait(narrow, 1, at(0));
        line.take(one_core, at(0));
        let waiting_wide = line.wait(wide, 2, at(1));
        // The wide step waits for both cores; a later one-core batch runs on the free one.
        let backfill = line.wait(narrow, 1, at(2));
        assert!(line.may_run(backfill, at(2)) && !line.may_run(waiting_wide, at(2)));
        // Once the wide waiter is overdue it holds the line: nobody runs past it.
        assert!(!line.may_run(backfill, at(61_002)));
        assert_eq!(line.take_ready(at(2)).len(), 1);
    }
}
