//! The host's cores, shared by the models of one server ([`CoreBudget`]). An instance computes
//! (an encoder batch, a decoder step) only while it holds as many cores as it has threads, so
//! that never more threads compute at once than the budget has cores, and an idle instance holds
//! none. Waiters are served earliest deadline first: a waiter's deadline is when it began to wait
//! plus its model's slack, which the core controller sets from each model's load and SLO (the
//! critical model's slack is the shortest). A waiter that is first but finds too few cores free
//! lets later ones that fit run on them while its deadline is ahead (backfilling), and holds the
//! others back once it has passed, so an instance of many threads is never starved by one-core
//! ones.

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Cores as a count: a budget's size, or what one computation holds.
pub type Cores = u16;

/// One model's account in a [`CoreBudget`].
#[derive(Debug, Clone, PartialEq)]
pub struct ModelCores {
    /// How long its computations may wait for cores before a later one of another model with
    /// more slack left goes first.
    pub slack: Duration,
    /// Cores its instances hold now.
    pub held: Cores,
    /// Its computations waiting for cores now.
    pub waiting: usize,
    /// Core-seconds its computations have held since the start, those computing now included.
    pub core_seconds: f64,
    /// When `held` last changed (`core_seconds` counts up to it).
    changed: Instant,
    /// Computations it ran.
    pub grants: u64,
}

impl Book {
    /// Whether the waiter at `place` may take its `threads` now: they are free, and every
    /// waiter ahead of it can neither run on what is free nor has waited past its deadline (a
    /// wide waiter is backfilled around while it has slack left, and then holds the line).
    fn may_run(&self, place: Place, threads: Cores, now: Instant) -> bool {
        if self.free < threads {
            return false;
        }
        for (ahead, need) in self.line.range(..place) {
            if self.free >= *need || ahead.0 <= now {
                return false;
            }
        }
        true
    }
}

impl ModelCores {
    /// Adds the core-seconds held since the last change, up to `now`.
    fn count_to(&mut self, now: Instant) {
        self.core_seconds += f64::from(self.held) * now.saturating_duration_since(self.changed).as_secs_f64();
        self.changed = now;
    }
}

/// A waiter's place in line: its deadline, then its ticket (first come among equal deadlines).
type Place = (Instant, u64);

#[derive(Debug)]
struct Book {
    free: Cores,
    models: Vec<ModelCores>,
    line: BTreeMap<Place, Cores>,
    next_ticket: u64,
}

/// A host's cores, shared by every instance of the models that registered with it.
#[derive(Debug)]
pub struct CoreBudget {
    cores: Cores,
    book: Mutex<Book>,
    turn: Condvar,
}

impl CoreBudget {
    /// A budget of `cores` (at least one).
    pub fn new(cores: Cores) -> Arc<Self> {
        let cores = cores.max(1);
        let book = Book { free: cores, models: Vec::new(), line: BTreeMap::new(), next_ticket: 0 };
        Arc::new(Self { cores, book: Mutex::new(book), turn: Condvar::new() })
    }

    pub fn cores(&self) -> Cores {
        self.cores
    }

    /// Opens a model's account with its first slack; its instances compute through the share.
    pub fn share(self: &Arc<Self>, slack: Duration) -> CoreShare {
        let mut book = self.lock();
        let account =
            ModelCores { slack, held: 0, waiting: 0, core_seconds: 0.0, changed: Instant::now(), grants: 0 };
        book.models.push(account);
        CoreShare { budget: self.clone(), model: book.models.len() - 1 }
    }

    /// Every model's account now, in the order they registered.
    pub fn accounts(&self) -> Vec<ModelCores> {
        let now = Instant::now();
        let mut book = self.lock();
        book.models.iter_mut().for_each(|account| account.count_to(now));
        book.models.clone()
    }

    /// Sets model `model`'s slack for the computations that begin to wait from now on.
    pub fn set_slack(&self, model: usize, slack: Duration) {
        if let Some(account) = self.lock().models.get_mut(model) {
            account.slack = slack;
        }
    }

    fn lock(&self) -> MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until `threads` cores are free and this waiter is first in line, then takes them.
    fn take(&self, model: usize, threads: Cores) {
        let threads = threads.clamp(1, self.cores);
        let mut book = self.lock();
        let place = (Instant::now() + book.models[model].slack, book.next_ticket);
        book.next_ticket += 1;
        book.line.insert(place, threads);
        book.models[model].waiting += 1;
        loop {
            if book.may_run(place, threads, Instant::now()) {
                book.line.remove(&place);
                book.free -= threads;
                let account = &mut book.models[model];
                account.count_to(Instant::now());
                account.waiting -= 1;
                account.held += threads;
                account.grants += 1;
                // The next in line may fit in what is left.
                self.turn.notify_all();
                return;
            }
            book = self.turn.wait(book).unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn give_back(&self, model: usize, threads: Cores) {
        let mut book = self.lock();
        book.free += threads;
        let account = &mut book.models[model];
        account.count_to(Instant::now());
        account.held -= threads;
        drop(book);
        self.turn.notify_all();
    }
}

/// One model's way into a [`CoreBudget`]; cheap to clone, one per instance.
#[derive(Debug, Clone)]
pub struct CoreShare {
    budget: Arc<CoreBudget>,
    model: usize,
}

impl CoreShare {
    /// Blocks until this model's computation may run on `threads` cores; they are held until
    /// the returned guard drops.
    pub fn hold(&self, threads: Cores) -> HeldCores<'_> {
        let threads = threads.clamp(1, self.budget.cores);
        self.budget.take(self.model, threads);
        HeldCores { share: self, threads }
    }

    /// The model's place among the budget's accounts.
    pub fn model(&self) -> usize {
        self.model
    }
}

/// Cores held for one computation; given back when dropped.
#[derive(Debug)]
pub struct HeldCores<'a> {
    share: &'a CoreShare,
    threads: Cores,
}

impl Drop for HeldCores<'_> {
    fn drop(&mut self) {
        self.share.budget.give_back(self.share.model, self.threads);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU16, Ordering};

    use super::*;

    #[test]
    fn never_more_cores_compute_than_the_budget_has() {
        let budget = CoreBudget::new(2);
        let (a, b) = (budget.share(Duration::ZERO), budget.share(Duration::ZERO));
        let busy = Arc::new(AtomicU16::new(0));
        let most = Arc::new(AtomicU16::new(0));
        let workers: Vec<_> = [(a.clone(), 1), (a, 1), (b.clone(), 2), (b, 1)]
            .into_iter()
            .map(|(share, threads)| {
                let (busy, most) = (busy.clone(), most.clone());
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        let _held = share.hold(threads);
                        let now = busy.fetch_add(threads, Ordering::SeqCst) + threads;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::yield_now();
                        busy.fetch_sub(threads, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        assert!(most.load(Ordering::SeqCst) <= 2);
        let accounts = budget.accounts();
        assert_eq!(accounts.iter().map(|a| a.grants).sum::<u64>(), 200);
        assert!(accounts.iter().all(|a| a.held == 0 && a.waiting == 0));
    }

    #[test]
    fn the_waiter_with_the_earliest_deadline_goes_first_and_a_wide_one_is_not_starved() {
        let budget = CoreBudget::new(2);
        let relaxed = budget.share(Duration::from_secs(60));
        let urgent = budget.share(Duration::ZERO);
        let order = Arc::new(Mutex::new(Vec::new()));
        // Both cores busy: every waiter below queues behind this hold.
        let blocker = urgent.hold(2);
        let spawn = |share: CoreShare, threads: Cores, tag: &'static str| {
            let order = order.clone();
            std::thread::spawn(move || {
                let _held = share.hold(threads);
                order.lock().unwrap().push(tag);
            })
        };
        let late = spawn(relaxed.clone(), 1, "relaxed");
        while budget.accounts()[0].waiting == 0 {
            std::thread::yield_now();
        }
        let wide = spawn(urgent.clone(), 2, "urgent-wide");
        while budget.accounts()[1].waiting == 0 {
            std::thread::yield_now();
        }
        drop(blocker);
        late.join().unwrap();
        wide.join().unwrap();
        // The urgent two-core step was asked for after the relaxed one and still ran first.
        assert_eq!(*order.lock().unwrap(), ["urgent-wide", "relaxed"]);
        assert!(budget.accounts()[1].core_seconds > 0.0);
    }

    #[test]
    fn a_narrow_waiter_backfills_around_a_wide_one_only_while_the_wide_one_has_slack() {
        let budget = CoreBudget::new(2);
        let wide = budget.share(Duration::from_secs(60));
        let narrow = budget.share(Duration::from_secs(120));
        let one_core = narrow.hold(1);
        let waiting_wide = {
            let wide = wide.clone();
            std::thread::spawn(move || drop(wide.hold(2)))
        };
        while budget.accounts()[0].waiting == 0 {
            std::thread::yield_now();
        }
        // The wide step waits for both cores; a later one-core batch runs on the free one.
        drop(narrow.hold(1));
        // An overdue wide waiter holds the line: nobody runs past it.
        let book = budget.lock();
        let overdue = Instant::now() + Duration::from_secs(61);
        let (behind, _) = book.line.last_key_value().map(|(p, n)| (*p, *n)).unwrap();
        let later = (behind.0 + Duration::from_secs(1), behind.1 + 1);
        assert!(book.may_run(later, 1, Instant::now()));
        assert!(!book.may_run(later, 1, overdue));
        drop(book);
        drop(one_core);
        waiting_wide.join().unwrap();
        assert_eq!(budget.accounts().iter().map(|a| a.grants).collect::<Vec<_>>(), [1, 2]);
    }
}
