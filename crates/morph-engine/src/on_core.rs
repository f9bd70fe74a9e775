//! How long a computation held a core: its wall time less the time its thread sat runnable,
//! waiting for a core the host's other threads held (the server's own request handling, a load
//! generator). Under load a batch's wall time grows by that wait, which is the load's, not the
//! batch's; a profile refined from wall times would learn the load as the cost of batching.
//! The wait is Linux's per-thread scheduler statistic (`/proc/thread-self/schedstat`); where it
//! cannot be read, the wall time. Only the calling thread's wait is taken off: an engine that
//! computes on threads of its own (ONNX Runtime's intra-op pool) keeps theirs, and in a virtual
//! machine the time the hypervisor gave the core to another guest (steal) stays in, as does the
//! time the kernel spent in interrupts meanwhile.

use std::time::Instant;

use morph_core::Nanos;

/// Started before a computation; [`OnCore::took`] after it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OnCore {
    started: Instant,
    waited: Option<Nanos>,
}

impl OnCore {
    pub(crate) fn start() -> Self {
        Self { started: Instant::now(), waited: runqueue_wait() }
    }

    /// Nanoseconds since [`OnCore::start`], less those this thread waited for a core meanwhile.
    pub(crate) fn took(&self) -> Nanos {
        let wall = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(Nanos::MAX);
        let waited = match (self.waited, runqueue_wait()) {
            (Some(before), Some(after)) => after.saturating_sub(before),
            _ => 0,
        };
        wall.saturating_sub(waited)
    }
}

/// The calling thread's time spent runnable but not running, since it started (the second
/// field of its `schedstat`).
fn runqueue_wait() -> Option<Nanos> {
    schedstat(1)
}

/// Field `k` of the calling thread's `schedstat`: time on a core (0), waiting for one (1), in ns.
fn schedstat(k: usize) -> Option<Nanos> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().nth(k)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_that_share_the_cores_are_timed_for_their_own_share_only() {
        // Three threads per core, each spinning for 200 ms of its own time on a core, wait
        // on each other's slices: their wall times exceed what they held a core, and `took`
        // gives the part held.
        let on_core = || schedstat(0).expect("Linux gives each thread's time on a core");
        let spin = move || {
            let clock = OnCore::start();
            let held = on_core();
            while on_core() - held < 200_000_000 {}
            (clock.took(), u64::try_from(clock.started.elapsed().as_nanos()).unwrap(), on_core() - held)
        };
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let runs: Vec<_> = (0..3 * cores).map(|_| std::thread::spawn(spin)).collect();
        let runs: Vec<_> = runs.into_iter().map(|r| r.join().unwrap()).collect();
        for &(took, wall, held) in &runs {
            assert!(took <= wall, "took {took} ns, wall {wall} ns");
            // At least what it held a core, within a few scheduler ticks: only waits are taken
            // off. (Not at most: in a virtual machine the time the hypervisor gave its core to
            // another guest counts as neither, and stays in `took`.)
            assert!(took + 60_000_000 > held, "took {took} ns against {held} ns on a core (wall {wall})");
        }
        // More threads than cores: some waited for the others' slices, and that was taken off.
        assert!(runs.iter().any(|&(took, wall, _)| wall - took > 100_000_000), "{runs:?}");
    }
}
