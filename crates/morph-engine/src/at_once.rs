//! Jobs run at once, each on a thread of its own: instances built or timed side by side.

/// Runs every job of `jobs` at once, each on a scoped thread of its own, and returns what each
/// returned in the jobs' order. A job that panics panics the caller, once all have ended.
pub fn at_once<T: Send>(jobs: impl IntoIterator<Item = impl FnOnce() -> T + Send>) -> Vec<T> {
    std::thread::scope(|s| {
        let running: Vec<_> = jobs.into_iter().map(|job| s.spawn(job)).collect();
        running.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Barrier;

    use super::*;

    #[test]
    fn every_job_runs_at_the_same_time_and_comes_back_in_order() {
        // Each job waits for all the others: run one after the other, the first would never return.
        let all = Barrier::new(4);
        let all = &all;
        let got = at_once((0..4).map(|k| {
            move || {
                all.wait();
                k * 10
            }
        }));
        assert_eq!(got, [0, 10, 20, 30]);
    }
}
