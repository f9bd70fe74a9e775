//! How many cores a decoder instance that shares a host's cores with other models computes on,
//! step by step: every core of the host while nothing else computes there, its own threads as
//! soon as anything else holds or waits for cores. llama.cpp fixes a context's threads when it
//! is made, so a change of width makes the context anew with every sequence's cache moved
//! ([`crate::stepper::Stepper::set_threads`]); to keep that rare, the instance widens only after
//! the host has had nothing else to compute for [`WIDEN_AFTER`], and narrows at once (another
//! model's computation then waits one step at most).

use std::time::{Duration, Instant};

use crate::stepper::StepperShape;

/// How long the host must have had nothing else to compute before a decoder widens.
pub const WIDEN_AFTER: Duration = Duration::from_millis(500);

/// A decoder instance's width between steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Width {
    narrow: StepperShape,
    wide: StepperShape,
    is_wide: bool,
    /// Since when the host has had nothing else to compute, as seen at step boundaries.
    idle_since: Option<Instant>,
}

impl Width {
    /// An instance of `narrow`'s threads on a host of `host_cores` cores, narrow at first.
    pub fn new(narrow: StepperShape, host_cores: usize) -> Self {
        let wide = narrow.all_on(host_cores.max(narrow.threads));
        Self { narrow, wide, is_wide: false, idle_since: None }
    }

    /// The shape the steps run on now.
    pub fn current(&self) -> StepperShape {
        if self.is_wide { self.wide } else { self.narrow }
    }

    /// Before a step, `host_idle` saying whether anything else holds or waits for the host's
    /// cores: the new shape when the width changes.
    pub fn next(&mut self, host_idle: bool, now: Instant) -> Option<StepperShape> {
        if !host_idle {
            self.idle_since = None;
            return self.set(false);
        }
        let since = *self.idle_since.get_or_insert(now);
        if now.duration_since(since) >= WIDEN_AFTER { self.set(true) } else { None }
    }

    /// The change did not take (the context could not be made): back to what runs.
    pub fn undo(&mut self) {
        self.is_wide = !self.is_wide;
        self.idle_since = None;
    }

    fn set(&mut self, wide: bool) -> Option<StepperShape> {
        let changed = self.is_wide != wide && self.wide != self.narrow;
        self.is_wide = wide;
        changed.then(|| self.current())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_widens_after_the_host_idles_long_enough_and_narrows_at_once() {
        let narrow = StepperShape::new(4, 2048, 1);
        let mut width = Width::new(narrow, 2);
        let t0 = Instant::now();
        assert_eq!(width.next(true, t0), None, "idle only just now");
        assert_eq!(width.next(true, t0 + WIDEN_AFTER / 2), None);
        let wide = width.next(true, t0 + WIDEN_AFTER).expect("widens");
        assert_eq!((wide.threads, wide.batch_threads), (2, 2));
        assert_eq!(width.next(true, t0 + WIDEN_AFTER * 2), None, "already wide");
        assert_eq!(width.next(false, t0 + WIDEN_AFTER * 3), Some(narrow), "narrows at once");
        assert_eq!(width.next(false, t0 + WIDEN_AFTER * 4), None);
        // Idle again: the wait starts over.
        assert_eq!(width.next(true, t0 + WIDEN_AFTER * 5), None);
        assert_eq!(width.current(), narrow);
    }

    #[test]
    fn an_instance_already_on_every_core_never_changes() {
        let mut width = Width::new(StepperShape::new(4, 2048, 2), 2);
        let t0 = Instant::now();
        width.next(true, t0);
        assert_eq!(width.next(true, t0 + WIDEN_AFTER), None);
        assert_eq!(width.next(false, t0 + WIDEN_AFTER * 2), None);
    }

    #[test]
    fn a_change_that_did_not_take_is_undone() {
        let narrow = StepperShape::new(4, 2048, 1);
        let mut width = Width::new(narrow, 2);
        let t0 = Instant::now();
        width.next(true, t0);
        assert!(width.next(true, t0 + WIDEN_AFTER).is_some());
        width.undo();
        assert_eq!(width.current(), narrow);
    }
}
