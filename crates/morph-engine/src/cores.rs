//! The host's cores, shared by the models of one server ([`CoreBudget`]): the pure
//! [`CoreLine`] (earliest deadline first by each model's slack, with backfilling; the
//! simulator keeps the same line) on the wall clock, behind a lock, with a condition variable
//! that wakes the waiters whenever cores come back.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

pub use morph_core::core_line::{Cores, ModelCores};
use morph_core::{CoreLine, Time};

/// A host's cores, shared by every instance of the models that registered with it.
#[derive(Debug)]
pub struct CoreBudget {
    /// The wall clock's epoch for the line's [`Time`].
    started: Instant,
    cores: Cores,
    line: Mutex<CoreLine>,
    turn: Condvar,
}

impl CoreBudget {
    /// A budget of `cores` (at least one).
    pub fn new(cores: Cores) -> Arc<Self> {
        let line = CoreLine::new(cores);
        let cores = line.cores();
        Arc::new(Self { started: Instant::now(), cores, line: Mutex::new(line), turn: Condvar::new() })
    }

    pub fn cores(&self) -> Cores {
        self.cores
    }

    fn now(&self) -> Time {
        Time(self.started.elapsed().as_nanos() as u64)
    }

    /// Opens a model's account with its first slack; its instances compute through the share.
    pub fn share(self: &Arc<Self>, slack: Duration) -> CoreShare {
        let model = self.lock().open(slack.as_nanos() as u64, self.now());
        CoreShare { budget: self.clone(), model }
    }

    /// Every model's account now, in the order they registered.
    pub fn accounts(&self) -> Vec<ModelCores> {
        let now = self.now();
        self.lock().accounts(now).to_vec()
    }

    /// Sets model `model`'s slack for the computations that begin to wait from now on.
    pub fn set_slack(&self, model: usize, slack: Duration) {
        self.lock().set_slack(model, slack.as_nanos() as u64);
    }

    fn lock(&self) -> MutexGuard<'_, CoreLine> {
        self.line.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until `threads` cores are free and this waiter may run, then takes them.
    fn take(&self, model: usize, threads: Cores) {
        let mut line = self.lock();
        let place = line.wait(model, threads, self.now());
        loop {
            let now = self.now();
            if line.may_run(place, now) {
                line.take(place, now);
                // The next in line may fit in what is left.
                self.turn.notify_all();
                return;
            }
            line = self.turn.wait(line).unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn give_back(&self, model: usize, threads: Cores) {
        let now = self.now();
        self.lock().give_back(model, threads, now);
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

    /// The cores of the host this share is of.
    pub fn host_cores(&self) -> Cores {
        self.budget.cores
    }

    /// Whether no computation of any model holds or waits for the host's cores now.
    pub fn host_idle(&self) -> bool {
        self.budget.lock().idle()
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
}
