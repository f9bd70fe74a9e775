//! Buckets refined while serving. A first start plans its buckets from a profile fitted to a
//! few measured shapes; the batches served then time the shapes the traffic really has. Every
//! `every` batches the latency is fitted again ([`LatencyFit`]) to the profile's grid and the
//! batches served (the most recent [`SERVED_KEPT`]). Where the new fit differs materially from
//! the profile the buckets were planned from ([`MATERIAL`]; a refit of the same times moves by
//! rounding, and the plan's thresholds would flip on it), the buckets are planned from it
//! ([`length_plan`]), and the policy takes them when they differ from its own. A refit that
//! replans is also handed to the deployment's [`RefitSink`] (the server's profile cache), so
//! that the next start plans from the batches this one served. Only batches timed as the
//! profile's shapes were are weighed: by the engine's time on a core, at the shape it computed
//! (a batch whose padding the engine removed, at its rows' mean length: the profile measured
//! rows of one length), beside every other instance busy (the policy's `batch_done`).

use std::collections::VecDeque;
use std::sync::Arc;

use morph_core::{LatencyFit, LatencyProfile, PaddedShape, Point};

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

#[derive(Debug)]
pub(crate) struct Refiner {
    /// The profile the first buckets came from, as points over its grid.
    prior: Vec<Point>,
    /// The profile the buckets now were planned from.
    planned_from: LatencyProfile,
    batches: Vec<u32>,
    lens: Vec<u32>,
    served: VecDeque<Point>,
    every: u32,
    since: u32,
    sink: Option<RefitSink>,
    /// Refits that changed the buckets.
    pub(crate) changes: u32,
}

impl Refiner {
    /// Refits `profile` every `every` batches; those that replan go to `sink` too.
    pub(crate) fn new(profile: &LatencyProfile, every: u32, sink: Option<RefitSink>) -> Self {
        let (batches, lens): (Vec<u32>, Vec<u32>) = (profile.batches().collect(), profile.lengths());
        let grid = batches.iter().flat_map(|&batch| lens.iter().map(move |&len| (batch, len)));
        let prior = grid
            .map(|(batch, len)| Point { batch, len, ms: profile.latency_ms(PaddedShape { batch, len }) })
            .collect();
        let (served, every) = (VecDeque::new(), every.max(1));
        let planned_from = profile.clone();
        Self { prior, planned_from, batches, lens, served, every, since: 0, sink, changes: 0 }
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
            self.served.push_back(Point { batch: shape.batch, len: shape.len, ms });
        }
        self.since += 1;
        if self.since < self.every {
            return None;
        }
        self.since = 0;
        let points: Vec<Point> = self.prior.iter().chain(&self.served).copied().collect();
        let fitted = LatencyFit::fit(&points)?.profile("refined", &self.batches, &self.lens).ok()?;
        if self.difference(&fitted) < MATERIAL {
            return None;
        }
        let profile = self.planned_from.with_latencies_of(fitted);
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
        let shapes = self.prior.iter().map(|p| PaddedShape { batch: p.batch, len: p.len });
        let relative = shapes.map(|s| (profile.latency_ms(s) / self.planned_from.latency_ms(s) - 1.0).abs());
        relative.sum::<f64>() / self.prior.len().max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use morph_core::fixtures::linear_profile as linear;

    #[test]
    fn served_batches_that_cost_more_per_call_than_profiled_replan_to_more_rows() {
        // Profiled: 0.5 ms a call; served: 20 ms a call, so batching pays at longer lengths.
        let mut prior = linear(0.5, 0.25);
        (prior.threads, prior.instances) = (Some(1), Some(2));
        let current = length_plan(&prior, 512).buckets;
        let kept = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = RefitSink::new({
            let kept = kept.clone();
            move |p: &LatencyProfile| kept.lock().unwrap().push(p.clone())
        });
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
        let one_call = PaddedShape { batch: 1, len: 16 };
        let (refit, profiled) = (kept[0].latency_ms(one_call), prior.latency_ms(one_call));
        assert!(refit > 1.2 * profiled, "towards the served 24 ms from the profiled {profiled}: {refit}");
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
