//! A server's shutdown as its calls see it: once it begins, readiness answers 503 (load
//! balancers stop sending); at the drain deadline every call still waiting or running is
//! answered with a 503 of type `shutting_down` (a stream gets it as its last event) before the
//! connections close, so none is cut without an answer.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::watch;

use crate::error::CallError;

#[derive(Debug)]
pub struct Drain {
    begun: AtomicBool,
    deadline: watch::Sender<bool>,
}

impl Default for Drain {
    fn default() -> Self {
        Self { begun: AtomicBool::new(false), deadline: watch::channel(false).0 }
    }
}

impl Drain {
    /// Shutdown began: calls in flight may finish, the server is no longer ready.
    pub fn begin(&self) {
        self.begun.store(true, Ordering::Relaxed);
    }

    pub fn begun(&self) -> bool {
        self.begun.load(Ordering::Relaxed)
    }

    /// The drain deadline passed: every call still in flight answers `shutting_down` now.
    pub fn deadline_passed(&self) {
        self.begin();
        self.deadline.send_replace(true);
    }

    pub fn deadline_has_passed(&self) -> bool {
        *self.deadline.borrow()
    }

    /// Resolves when the drain deadline passes.
    pub async fn deadline(&self) {
        let mut passed = self.deadline.subscribe();
        // The sender lives as long as `self`, so waiting cannot fail while it is borrowed.
        let _ = passed.wait_for(|&passed| passed).await;
    }

    /// `work`, or `shutting_down` if the drain deadline passes first (the work is dropped:
    /// its claims cancel what it had asked of the engines).
    pub async fn or_deadline<T>(
        &self,
        work: impl Future<Output = Result<T, CallError>>,
    ) -> Result<T, CallError> {
        tokio::select! {
            result = work => result,
            () = self.deadline() => Err(CallError::ShuttingDown),
        }
    }
}
