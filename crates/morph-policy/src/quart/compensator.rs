//! QUART's CPU compensator (§5.3, Alg. 1 lines 14–24): a stage that lost replicas to the
//! smoother gets more threads per replica, the fewest that bring its delay within target by
//! the stage's fitted s(C) = a + b/C; when no thread count up to CPU_max does, it keeps the
//! corrector's count instead (Alg. 1 line 24: "call Correct").

use morph_core::StageTime;
use morph_core::time::Millis;

use crate::queueing::{DelayModel, Load, delay};

/// The outcome for one stage: its replicas and threads per replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compensated {
    pub replicas: u32,
    pub threads: u16,
}

/// What the compensator needs of a stage whose count the smoother cut from `corrected` to
/// `smoothed`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cut {
    pub time: StageTime,
    /// Seconds added to every request's service (the hop in).
    pub hop_s: f64,
    pub lambda: f64,
    pub ca: f64,
    pub target: f64,
    pub threads: u16,
    pub corrected: u32,
    pub smoothed: u32,
}

/// C'_i = min{ C ∈ choices, C ≥ C_i : T(λ_i, 1/s_i(C), r'_i) ≤ T_target,i }, else the
/// corrector's count at the current threads.
pub fn compensate(model: DelayModel, cut: Cut, choices: &[u16]) -> Compensated {
    let meets = |threads: u16| {
        let mu = 1.0 / (Millis(cut.time.ms(threads)).secs() + cut.hop_s);
        let load = Load { lambda: cut.lambda, mu, replicas: cut.smoothed, ca: cut.ca, cs: 0.0 };
        delay(model, load) <= cut.target
    };
    let mut options: Vec<u16> = choices.iter().copied().filter(|&c| c >= cut.threads).collect();
    options.sort_unstable();
    match options.into_iter().find(|&c| meets(c)) {
        Some(threads) => Compensated { replicas: cut.smoothed, threads },
        None => Compensated { replicas: cut.corrected, threads: cut.threads },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut(lambda: f64, smoothed: u32) -> Cut {
        Cut {
            time: StageTime { a_ms: 20.0, b_ms: 80.0 },
            hop_s: 0.0,
            lambda,
            ca: 1.0,
            target: 0.12,
            threads: 1,
            corrected: 6,
            smoothed,
        }
    }

    #[test]
    fn more_threads_make_up_for_fewer_replicas_and_the_fewest_that_suffice_are_chosen() {
        // 1 thread: 100 ms per request, M/M/3 at ρ 0.67 gives 144 ms, over the 120 ms target;
        // 2 threads: 60 ms per request, within it.
        let out = compensate(DelayModel::ErlangC, cut(20.0, 3), &[1, 2, 4, 8]);
        assert_eq!(out, Compensated { replicas: 3, threads: 2 });
    }

    #[test]
    fn when_no_thread_count_suffices_the_corrected_count_stands() {
        let out = compensate(DelayModel::ErlangC, cut(100.0, 2), &[1, 2]);
        assert_eq!(out, Compensated { replicas: 6, threads: 1 });
    }
}
