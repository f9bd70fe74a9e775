//! A decoder instance's iteration reports, delivered on its own thread: the decoder calls the
//! driver directly after each iteration (schedule, step, update in one loop), and whatever the
//! driver decides for it (joins, cancels, the resume) is in the thread's inbox when the call
//! returns, so the next iteration starts without waiting on another thread. The instance is
//! loaded before the driver knows its id; the reports of iterations run before
//! [`IterationRelay::bind`] are kept and handed over there.

use std::sync::{Arc, Mutex, MutexGuard};

use morph_decoder::{IterationHook, IterationReport};

/// What receives a bound instance's reports.
pub type IterationSink = Box<dyn FnMut(IterationReport) + Send>;

enum Relay {
    /// Not bound yet: the reports so far.
    Holding(Vec<IterationReport>),
    Bound(IterationSink),
}

impl Default for Relay {
    fn default() -> Self {
        Relay::Holding(Vec::new())
    }
}

/// Where one decoder instance's iteration reports go (see the module doc).
#[derive(Default, Clone)]
pub struct IterationRelay(Arc<Mutex<Relay>>);

impl std::fmt::Debug for IterationRelay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &*self.lock() {
            Relay::Holding(_) => "unbound",
            Relay::Bound(_) => "bound",
        };
        f.debug_tuple("IterationRelay").field(&state).finish()
    }
}

impl IterationRelay {
    fn lock(&self) -> MutexGuard<'_, Relay> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The hook the decoder thread calls after each iteration.
    pub fn hook(&self) -> IterationHook {
        let relay = self.clone();
        Box::new(move |report| match &mut *relay.lock() {
            Relay::Bound(sink) => sink(report),
            Relay::Holding(reports) => reports.push(report),
        })
    }

    /// Sends the reports to `sink` from now on, the held ones first. `false` (and `sink`
    /// dropped) if already bound.
    pub fn bind(&self, mut sink: IterationSink) -> bool {
        let mut relay = self.lock();
        match std::mem::take(&mut *relay) {
            bound @ Relay::Bound(_) => {
                *relay = bound;
                false
            }
            Relay::Holding(reports) => {
                reports.into_iter().for_each(&mut sink);
                *relay = Relay::Bound(sink);
                true
            }
        }
    }

    /// Whether a sink receives the reports.
    pub fn is_bound(&self) -> bool {
        matches!(&*self.lock(), Relay::Bound(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(produced: usize) -> IterationReport {
        IterationReport {
            left: Vec::new(),
            failed: false,
            produced,
            empty: false,
            sequences: 1,
            prefilling: false,
            seconds: 0.0,
            context: 0,
        }
    }

    #[test]
    fn reports_before_binding_are_delivered_first_and_in_order() {
        let relay = IterationRelay::default();
        let mut hook = relay.hook();
        hook(report(1));
        hook(report(2));
        assert!(!relay.is_bound());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = seen.clone();
        assert!(relay.bind(Box::new(move |r| into.lock().unwrap().push(r.produced))));
        hook(report(3));
        assert_eq!(*seen.lock().unwrap(), vec![1, 2, 3]);
        assert!(!relay.bind(Box::new(|_| panic!("a second sink never receives"))));
        hook(report(4));
        assert_eq!(*seen.lock().unwrap(), vec![1, 2, 3, 4]);
    }
}
