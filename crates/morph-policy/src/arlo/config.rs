//! The parameters of a [`super::ArloPolicy`], with the presets that make it Arlo or one of
//! Arlo's baselines (§5 "Compared schemes", §5.2.4).

use morph_core::time::{Millis, Seconds};
use serde::{Deserialize, Serialize};

use super::scaling::ScalingConfig;
use crate::arlo::{DispatchParams, DispatchRule};

/// How the runtimes' max lengths are chosen (§3.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RuntimeSet {
    /// The paper's linear steps at the profile's staircase width (`count` even steps without one).
    Staircase,
    /// Bucket bounds by DP over the lengths of the first period, k at the knee (≤ `count`).
    Optimised,
    /// Exactly `max_lens` (empty: one runtime at the longest length, as ST).
    Explicit,
    /// One dynamic-shape runtime at the longest length (DT).
    Dynamic,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ArloConfig {
    pub runtime_set: RuntimeSet,
    /// Runtimes for `explicit`; ignored otherwise.
    pub max_lens: Vec<u32>,
    /// Runtimes for a profile without a staircase, and the most the optimised rule may use.
    pub runtimes: u32,
    /// Longest input served; default: the profile's longest length rounded up to a multiple of 8
    /// (a table profiled at 1, 5, …, 509 serves 512).
    pub max_len: Option<u32>,
    /// Rows per batch of every runtime (Arlo: 1).
    pub batch: u32,
    /// Re-allocate instances among runtimes from the observed lengths (Arlo's Runtime Scheduler).
    pub allocate: bool,
    /// Period of the Runtime Scheduler (120 s).
    pub period_s: Seconds,
    /// The first allocation, once some lengths are seen.
    pub first_allocation_s: Seconds,
    /// Replacements in flight at once; 0: `replace_share` of the instances (at least one).
    pub replace_batch: usize,
    /// The share of the instances replaced at once when `replace_batch` is 0 (the paper: a tenth).
    pub replace_share: f64,
    /// Replace make-before-break (Morph's): a replacement's new instance is launched while the
    /// one it replaces keeps serving, and once it is up one of the two is retired, the old one
    /// if the rest still covers the current need at least as well as before (else it waits, up
    /// to `handover_timeout_s`, then the new one goes); scale-in likewise waits until the rest
    /// covers the need. Off: the paper's order, each replaced instance drained, then its
    /// successor started in its slot.
    pub make_before_break: bool,
    /// How long a make-before-break hand-over waits for the need to allow retiring the old
    /// instance before it keeps the old one and retires the new.
    pub handover_timeout_s: Seconds,
    /// The need is the busiest tick of this many recent seconds, per length class.
    pub need_window_s: Seconds,
    /// With `dynamic_longest`: allocate onto fixed runtimes only where the lengths seen, padded
    /// to their bounds, cost less than on the dynamic runtime at its measured penalty
    /// ([`super::premise`]); off: whatever the dynamic runtime's speed.
    pub require_fixed_gain: bool,
    /// Binding on arrival: the instance a request goes to when it arrives (Arlo's Algorithm 1
    /// or an ablation); unused with `late_binding`.
    pub dispatch: DispatchRule,
    /// Requests wait by length bound and an idle instance takes the oldest it fits (Morph's
    /// robust Arlo, `super::waiting`), instead of binding to an instance on arrival by `dispatch`.
    pub late_binding: bool,
    /// With `late_binding`: every fixed runtime keeps a dynamic fallback up to the set's longest
    /// length (a second engine on its instance, [`morph_core::RuntimeSpec::with_fallback`]), so
    /// a long request that finds no idle instance of a runtime that fits it runs on any idle
    /// one, and an idle instance with nothing it fits waiting takes the oldest longer request
    /// (late binding across classes): the long tail is pooled over the fleet, as DT pools it.
    pub dynamic_fallback: bool,
    /// With `dynamic_fallback`: the backlog is one pool, as DT's is. An idle instance takes the
    /// oldest request its shape fits, its own class's or a shorter one's (then, as before, the
    /// oldest longer one on its fallback), and a fixed runtime's fallback runs the shorter
    /// classes' inputs at their own length ([`morph_core::RuntimeSpec::with_demoted`]) as far as
    /// the profile prices that, at the dynamic penalty, below the padding of its shape. Off: an
    /// idle instance takes its own class first, then the shorter ones (padded to its shape),
    /// each oldest first; in a burst past capacity the class whose instances keep up least then
    /// waits longest.
    pub pooled_backlog: bool,
    /// The allocation's accounting: `None`, the paper's (M_i at ρ = 1, Eq. 3); a utilisation
    /// `u`, Morph's stable accounting (M_i at ρ = u, overload carried to the longer runtimes
    /// and priced; see `crate::arlo::reallocate::Accounting`).
    pub stable_utilisation: Option<f64>,
    /// The longest runtime is dynamic-shaped: the rare long inputs and the short ones demoted to
    /// it pay their own length (with the dynamic penalty) instead of the longest padding; and
    /// every instance starts on it (DT) until the first allocation has seen lengths, instead of
    /// an even split over a runtime set chosen before any request.
    pub dynamic_longest: bool,
    /// λ, α and L of Algorithm 1.
    pub lambda: f64,
    pub alpha: f64,
    pub max_peek: usize,
    pub scaling: ScalingConfig,
    /// Most requests waiting over all instances; beyond it arrivals get `QueueFull`.
    pub max_queue: usize,
    /// SLO for M_i, L_i and target tracking; default: the deployment's.
    pub slo_ms: Option<Millis>,
    /// Tick period for scaling checks and replacement progress.
    pub tick_s: Seconds,
}

impl Default for ArloConfig {
    /// Arlo as the paper describes it, with its parameters (preset `arlo-paper`).
    fn default() -> Self {
        let d = DispatchParams::default();
        Self {
            runtime_set: RuntimeSet::Staircase,
            max_lens: Vec::new(),
            runtimes: 8,
            max_len: None,
            batch: 1,
            allocate: true,
            period_s: Seconds(120.0),
            first_allocation_s: Seconds(10.0),
            replace_batch: 0,
            replace_share: 0.1,
            make_before_break: false,
            handover_timeout_s: Seconds(10.0),
            need_window_s: Seconds(3.0),
            require_fixed_gain: true,
            dispatch: DispatchRule::Arlo,
            late_binding: false,
            dynamic_fallback: false,
            pooled_backlog: false,
            stable_utilisation: None,
            dynamic_longest: false,
            lambda: d.lambda,
            alpha: d.alpha,
            max_peek: d.max_peek,
            scaling: ScalingConfig::default(),
            max_queue: 100_000,
            slo_ms: None,
            tick_s: Seconds(1.0),
        }
    }
}

impl ArloConfig {
    /// The defaults of a named scheme (the registry's Arlo family), before the user's parameters
    /// are applied (scaling is off
    /// in all; Arlo's paper pairs itself with `target-tracking` and the baselines with `headroom`):
    /// - `arlo`: Morph's robust Arlo: the longest runtime dynamic-shaped, and every instance on
    ///   it (DT) until the first allocation, which takes runtime bounds from the first second's
    ///   lengths (`optimised`), periodic allocation with the stable accounting (every runtime
    ///   under 90% busy, demotion's carry-over counted), reached half the fleet at a time
    ///   make-before-break (no instance leaves before its successor serves and the rest covers
    ///   the need), late binding (an idle instance takes the oldest request it fits), so it
    ///   degrades gracefully at the edge of capacity and serves from the first second;
    /// - `arlo-paper`: the paper's exact form: staircase runtimes, periodic allocation,
    ///   Algorithm 1 on arrival;
    /// - `arlo-ilb`, `arlo-ig`: `arlo-paper` with the ILB or IG dispatcher (Table 4 ablations);
    /// - `st`: one static runtime at the longest length, load balanced;
    /// - `dt`: one dynamic-shape runtime, load balanced;
    /// - `infaas`: the staircase variants split evenly (no length-aware allocation), first-fit
    ///   dispatch.
    pub fn preset(name: &str) -> Option<Self> {
        let paper = Self::default();
        let baseline =
            |runtime_set, dispatch| Self { runtime_set, allocate: false, dispatch, ..Self::default() };
        Some(match name {
            "arlo" => Self {
                runtime_set: RuntimeSet::Optimised,
                late_binding: true,
                dynamic_fallback: true,
                pooled_backlog: true,
                stable_utilisation: Some(0.9),
                dynamic_longest: true,
                first_allocation_s: Seconds(1.0),
                replace_share: 0.5,
                make_before_break: true,
                ..paper
            },
            "arlo-paper" => paper,
            "arlo-ilb" => Self { dispatch: DispatchRule::Ideal, ..paper },
            "arlo-ig" => Self { dispatch: DispatchRule::Greedy, ..paper },
            "st" => baseline(RuntimeSet::Explicit, DispatchRule::Greedy),
            "dt" => baseline(RuntimeSet::Dynamic, DispatchRule::Greedy),
            "infaas" => baseline(RuntimeSet::Staircase, DispatchRule::FirstFit),
            _ => return None,
        })
    }

    /// Refuses, by name, a switch that would do nothing without the one it builds on.
    pub fn check(&self) -> Result<(), String> {
        if self.dynamic_fallback && !self.late_binding {
            return Err("dynamic_fallback needs late_binding (a request bound on arrival never moves)".into());
        }
        if self.pooled_backlog && !self.dynamic_fallback {
            return Err("pooled_backlog needs dynamic_fallback (the runtimes it pools run on it)".into());
        }
        Ok(())
    }

    pub fn dispatch_params(&self) -> DispatchParams {
        DispatchParams { lambda: self.lambda, alpha: self.alpha, max_peek: self.max_peek }
    }
}
