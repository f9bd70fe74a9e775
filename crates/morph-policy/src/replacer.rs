//! Keeping a fixed layout: an instance that is lost is replaced by a launch of the same unit,
//! and a launch that fails is tried again with the first event a second or more later (no
//! ticks: a tick would stretch every simulated run to the next one).

use morph_core::time::ms_to_nanos;
use morph_core::{Action, Tickets, Time, UnitSpec};

/// How long after a failed replacement it is tried again, at the earliest.
pub(crate) const RELAUNCH_AFTER_MS: f64 = 1_000.0;

#[derive(Debug, Default)]
pub(crate) struct Replacer {
    tickets: Tickets,
    /// Replacements whose launch failed, and when the last one failed.
    failed: Vec<UnitSpec>,
    failed_at: Time,
}

impl Replacer {
    /// Launches a replacement for a lost instance of `unit`.
    pub(crate) fn replace(&mut self, unit: UnitSpec, actions: &mut Vec<Action>) {
        actions.push(Action::Launch { ticket: self.tickets.issue(), unit, host: None });
    }

    /// Notes a failed launch of `unit`, to be tried again.
    pub(crate) fn launch_failed(&mut self, now: Time, unit: UnitSpec) {
        self.failed.push(unit);
        self.failed_at = now;
    }

    /// Tries the failed launches again once their wait is over (call with every event).
    pub(crate) fn retry_due(&mut self, now: Time, actions: &mut Vec<Action>) {
        if !self.failed.is_empty() && now >= self.failed_at + ms_to_nanos(RELAUNCH_AFTER_MS) {
            for unit in std::mem::take(&mut self.failed) {
                self.replace(unit, actions);
            }
        }
    }
}
