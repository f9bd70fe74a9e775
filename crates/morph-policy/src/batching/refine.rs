//! Buckets refined while serving. A first start plans its buckets from a profile fitted to a
//! few measured shapes; the batches served then time the shapes the traffic really has. Every
//! `every` batches the profile is corrected to the batches served (the most recent
//! [`SERVED_KEPT`]) by two numbers ([`Correction`]): a slowdown of every shape alike and a cost
//! per batch the profile did not see. Where the corrected profile differs materially from
//! the profile the buckets were planned from ([`MATERIAL`]; a refit of the same times moves by
//! rounding, and the plan's thresholds would flip on it), the buckets are planned from it
//! ([`length_plan`]), and the policy takes them when they differ from its own. That corrected
//! profile is also handed to the deployment's [`RefitSink`] (the server's profile cache), so
//! that the next start plans from the batches this one served. Only batches timed as the
//! profile's shapes were are weighed: by the engine's time on a core, at the shape it computed
//! (a batch whose padding the engine removed, at its rows' mean length: the profile measured
//! rows of one length), beside every other instance busy (the policy's `batch_done`).

use std::collections::VecDeque;
use std::sync::Arc;

use morph_core::{LatencyProfile, PaddedShape, Point};

use super::buckets::Bucket;
use super::plan::length_plan;

/// The served batches a refit weighs, most recent first out.
pub(crate) const SERVED_KEPT: usize = 2_048;
/// The mean relative difference over the grid from which a refit replans.
pub(crate) const MATERIAL: f64 = 0.1;

/// Where a profile refitted to the batches served goes besides the policy's own plan. It is
/// called on the policy's thread: it hands the profile on and returns (no I/O, no waiting).
#[derive(Clone)]
pub struct RefitSink(Arc<dyn Fn(&LatencyProfile) + Send + Sync>);

impl RefitSink {
    pub fn new(keep: impl Fn(&LatencyProfile) + Send + Sync + 'static) -> Self {
        Self(Arc::new(keep))
    }

    pub fn keep(&self, profile: &LatencyProfile) {
        (self.0)(profile)
    }
}

impl std::fmt::Debug for RefitSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RefitSink")
    }
}

/// The batches served as the prior profile's times: t_served(b, l) = `scale` · t_prior(b, l) +
/// `per_batch_ms`. Two numbers fitted over every shape served, so the shapes the traffic never
/// ran keep the prior's proportions. (A free refit of the four-term latency fit weighed mostly
/// the shapes served, full batches under overload, and extrapolated to the rest: a served run
/// replanned one row for every length, then sixteen again.)
#[derive(Debug, Clone, Copy, PartialEq)]
struct Correction {
    scale: f64,
    per_batch_ms: f64,
}

impl Correction {
    /// Least squares on relative error over `(prior ms, served ms)` pairs, the cost per batch at
    /// least 0; `None` without a positive scale.
    fn fit(served: impl Iterator<Item = (f64, f64)>) -> Option<Self> {
        // Minimise Σ (scale·xᵢ + per_batch·yᵢ − 1)², xᵢ = priorᵢ / servedᵢ, yᵢ = 1 / servedᵢ.
        let (mut xx, mut xy, mut yy, mut x1, mut y1) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for (prior, ms) in served.filter(|&(prior, ms)| prior > 0.0 && ms > 0.0) {
            let (x, y) = (prior / ms, 1.0 / ms);
            (xx, xy, yy, x1, y1) = (xx + x * x, xy + x * y, yy + y * y, x1 + x, y1 + y);
        }
        let det = xx * yy - xy * xy;
        let both = (det > 1e-9 * xx * yy)
            .then(|| Self { scale: (x1 * yy - y1 * xy) / det, per_batch_ms: (xx * y1 - xy * x1) / det });
        let fit = match both {
            Some(c) if c.per_batch_ms >= 0.0 => c,
            _ => Self { scale: x1 / xx, per_batch_ms: 0.0 },
        };
        (fit.scale > 0.0 && fit.scale.is_finite()).then_some(fit)
    }

    fn ms(self, prior_ms: f64) -> f64 {
        self.scale * prior_ms + self.per_batch_ms
    }
}

#[derive(Debug)]
pub(crate) struct Refiner {
    /// The profile the first buckets came from, which every correction applies to.
    prior: LatencyProfile,
    /// The profile the buckets now were planned from.
    planned_from: LatencyProfile,
    /// The batches served: the prior's time at the shape each computed, and the time it took.
    served: VecDeque<(f64, f64)>,
    every: u32,
    since: u32,
    sink: Option<RefitSink>,
    /// Refits that changed the buckets.
    pub(crate) changes: u32,
}

impl Refiner {
    /// Corrects `profile` every `every` batches; corrections that move it materially go to
    /// `sink` too.
    pub(crate) fn new(profile: &LatencyProfile, every: u32, sink: Option<RefitSink>) -> Self {
        let (served, every) = (VecDeque::new(), every.max(1));
        let (prior, planned_from) = (profile.clone(), profile.clone());
        Self { prior, planned_from, served, every, since: 0, sink, changes: 0 }
    }

    /// The prior's grid of shapes.
    fn grid(&self) -> impl Iterator<Item = PaddedShape> + '_ {
        let lens = self.prior.lengths();
        self.prior
            .batches()
            .flat_map(move |batch| lens.clone().into_iter().map(move |len| PaddedShape { batch, len }))
    }

    /// A batch priced at `shape` took `ms`. Every `every` batches: the buckets up to `max_len`
    /// a refit plans, if they differ from `current`.
    pub(crate) fn served(
        &mut self,
        shape: PaddedShape,
        ms: f64,
        current: &[Bucket],
        max_len: u32,
    ) -> Option<Vec<Bucket>> {
        if ms > 0.0 {
            if self.served.len() == SERVED_KEPT {
                self.served.pop_front();
            }
            self.served.push_back((self.prior.latency_ms(shape), ms));
        }
        self.since += 1;
        if self.since < self.every {
            return None;
        }
        self.since = 0;
        let correction = Correction::fit(self.served.iter().copied())?;
        let corrected = self.grid().map(|shape| Point {
            batch: shape.batch,
            len: shape.len,
            ms: correction.ms(self.prior.latency_ms(shape)),
        });
        let fitted = LatencyProfile::from_points("refined", corrected.collect::<Vec<_>>()).ok()?;
        if self.difference(&fitted) < MATERIAL {
            return None;
        }
        let mut profile = self.planned_from.with_latencies_of(fitted);
        profile.served_batches = Some(self.served.len() as u32);
        if let Some(sink) = &self.sink {
            sink.keep(&profile);
        }
        let buckets = length_plan(&profile, max_len).buckets;
        self.planned_from = profile;
        (buckets != current).then(|| {
            self.changes += 1;
            buckets
        })
    }

    /// The mean relative difference of `profile` from the one the buckets were planned from.
    fn difference(&self, profile: &LatencyProfile) -> f64 {
        let relative: Vec<f64> = self
            .grid()
            .map(|s| (profile.latency_ms(s) / self.planned_from.latency_ms(s) - 1.0).abs())
            .collect();
        relative.iter().sum::<f64>() / relative.len().max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use morph_core::fixtures::linear_profile as linear;

    use super::super::plan::rows_worth;

    /// A sink that keeps every profile it is handed, and what it kept.
    fn keeping() -> (RefitSink, Arc<std::sync::Mutex<Vec<LatencyProfile>>>) {
        let kept = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = RefitSink::new({
            let kept = kept.clone();
            move |p: &LatencyProfile| kept.lock().unwrap().push(p.clone())
        });
        (sink, kept)
    }

    #[test]
    fn served_batches_that_cost_more_per_call_than_profiled_replan_to_more_rows() {
        // Profiled: 0.5 ms a call; served: 20 ms a call, so batching pays at longer lengths.
        let mut prior = linear(0.5, 0.25);
        (prior.threads, prior.instances) = (Some(1), Some(2));
        let current = length_plan(&prior, 512).buckets;
        let (sink, kept) = keeping();
        let mut refiner = Refiner::new(&prior, 64, Some(sink));
        let truth = |b: u32, l: u32| 20.0 + 0.25 * f64::from(b * l);
        let mut replanned = None;
        for k in 0..64u32 {
            let shape = PaddedShape {
                batch: [1, 2, 4, 8, 16][k as usize % 5],
                len: [16, 32, 64, 128][k as usize % 4],
            };
            let out = refiner.served(shape, truth(shape.batch, shape.len), &current, 512);
            assert!(out.is_none() || k == 63, "a refit only every 64 batches");
            replanned = replanned.or(out);
        }
        let replanned = replanned.expect("the served cost differs: new buckets");
        let rows_at =
            |buckets: &[Bucket], len: u32| buckets.iter().find(|b| b.max_len >= len).map(|b| b.max_rows);
        assert!(rows_at(&replanned, 64) > rows_at(&current, 64), "{current:?} -> {replanned:?}");
        assert_eq!(replanned.last().map(|b| b.max_len), Some(512));
        assert_eq!(refiner.changes, 1);
        // The refit the buckets came from is kept, as the layout the prior profiled.
        let kept = kept.lock().unwrap();
        assert_eq!(kept.len(), 1);
        assert_eq!(
            (kept[0].threads, kept[0].instances, kept[0].model.as_str()),
            (Some(1), Some(2), "linear")
        );
        assert_eq!(kept[0].served_batches, Some(64), "marked a refit, of the batches it weighed");
        let one_call = PaddedShape { batch: 1, len: 16 };
        let (refit, profiled) = (kept[0].latency_ms(one_call), prior.latency_ms(one_call));
        assert!(refit > 1.2 * profiled, "towards the served 24 ms from the profiled {profiled}: {refit}");
    }

    #[test]
    fn a_correction_is_a_slowdown_and_a_cost_per_batch_of_at_least_zero() {
        let prior = [2.0, 5.0, 30.0, 120.0];
        let fit = |served: &dyn Fn(f64) -> f64| {
            let pairs: Vec<(f64, f64)> = prior.iter().map(|&p| (p, served(p))).collect();
            Correction::fit(pairs.into_iter()).unwrap()
        };
        let c = fit(&|p| 1.3 * p + 2.0);
        assert!((c.scale - 1.3).abs() < 1e-9 && (c.per_batch_ms - 2.0).abs() < 1e-9, "{c:?}");
        // Cheaper a batch than profiled: no negative cost per batch, a scale alone.
        let c = fit(&|p| 0.9 * p - 1.0);
        assert_eq!(c.per_batch_ms, 0.0);
        assert!(c.scale > 0.0 && c.scale < 0.9, "{c:?}");
        assert_eq!(Correction::fit(std::iter::empty()), None);
    }

    #[test]
    fn full_batches_served_slower_scale_the_shapes_never_served_alike() {
        // Overload: only batches of 16 rows, every one 30% slower than profiled. The single rows
        // never served keep their proportion to them, so the rows planned stay the prior's.
        let prior = linear(2.0, 0.25);
        let current = length_plan(&prior, 512).buckets;
        let (sink, kept) = keeping();
        let mut refiner = Refiner::new(&prior, 60, Some(sink));
        for k in 0..60u32 {
            let shape = PaddedShape { batch: 16, len: [16, 32, 64, 128][k as usize % 4] };
            refiner.served(shape, 1.3 * prior.latency_ms(shape), &current, 512);
        }
        let kept = kept.lock().unwrap();
        assert_eq!(kept.len(), 1, "a 30% slowdown is kept for the next start");
        for shape in [PaddedShape { batch: 1, len: 8 }, PaddedShape { batch: 2, len: 512 }] {
            let ratio = kept[0].latency_ms(shape) / prior.latency_ms(shape);
            assert!((ratio - 1.3).abs() < 1e-6, "{shape:?}: {ratio}");
        }
        // (The bounds may move by a token where the fixture's straight lines tie with the
        // padding budget.)
        for len in 1..=512 {
            assert_eq!(rows_worth(&kept[0], len), rows_worth(&prior, len), "{len} tokens");
        }
    }

    #[test]
    fn batches_served_as_profiled_keep_the_buckets() {
        let prior = linear(2.0, 0.25);
        // A refit of these times moves by rounding only: the buckets stay the profile's.
        let current = length_plan(&prior, 512).buckets;
        let mut refiner = Refiner::new(&prior, 10, None);
        for k in 0..30u32 {
            let shape = PaddedShape { batch: 1 << (k % 5), len: 16 << (k % 4) };
            let ms = 2.0 + 0.25 * f64::from(shape.batch * shape.len);
            assert_eq!(refiner.served(shape, ms, &current, 512), None, "batch {k}");
        }
        assert_eq!(refiner.changes, 0);
    }
}
