//! Every padded shape's batch time up to a profile's largest measured shape, computed once. A
//! run prices one batch per event, and interpolating the profile each time was a tenth of a
//! run at scale; the table gives the same nanoseconds.

use morph_core::{LatencyProfile, Nanos, PaddedShape, ShapeKind};

/// Most shapes a table holds (two prices each): 512 tokens by 64 rows, 512 KiB. A profile
/// measured further is priced shape by shape.
const MOST_SHAPES: usize = 512 * 64;

/// Batch times by padded shape, rows 1 to `rows` and lengths 1 to `lens`: as the profile gives
/// them (a fixed-shape runtime) and with the dynamic-shape penalty.
#[derive(Debug, Clone)]
pub(crate) struct PriceTable {
    lens: u32,
    rows: u32,
    fixed: Vec<Nanos>,
    dynamic: Vec<Nanos>,
}

impl PriceTable {
    /// `None` when the profile's largest shape is past [`MOST_SHAPES`].
    pub(crate) fn new(profile: &LatencyProfile, dynamic_penalty: f64) -> Option<Self> {
        let (lens, rows) = (profile.max_len(), profile.batches().max().unwrap_or(0));
        if lens as usize * rows as usize > MOST_SHAPES {
            return None;
        }
        let shapes = (1..=rows).flat_map(|batch| (1..=lens).map(move |len| PaddedShape { len, batch }));
        let fixed: Vec<Nanos> = shapes.map(|shape| profile.latency(shape)).collect();
        let dynamic = fixed.iter().map(|&base| penalised(base, dynamic_penalty)).collect();
        Some(Self { lens, rows, fixed, dynamic })
    }

    /// The time of a batch of `shape` on a runtime of `kind`, if the table holds the shape.
    pub(crate) fn get(&self, shape: PaddedShape, kind: ShapeKind) -> Option<Nanos> {
        let PaddedShape { len, batch } = shape;
        if len == 0 || batch == 0 || len > self.lens || batch > self.rows {
            return None;
        }
        let at = (batch - 1) as usize * self.lens as usize + (len - 1) as usize;
        Some(match kind {
            ShapeKind::Fixed => self.fixed[at],
            ShapeKind::Dynamic => self.dynamic[at],
        })
    }
}

/// A dynamic-shape runtime's time for a batch the profile prices at `base`.
pub(crate) fn penalised(base: Nanos, dynamic_penalty: f64) -> Nanos {
    (base as f64 * dynamic_penalty).round() as Nanos
}

#[cfg(test)]
mod tests {
    use morph_core::fixtures::{flat_profile, linear_profile};

    use super::*;

    #[test]
    fn the_table_gives_the_profiles_price_for_every_shape_it_holds() {
        let profile = linear_profile(0.3, 0.011);
        let table = PriceTable::new(&profile, 1.5).expect("a small profile is tabled");
        for batch in 1..=profile.batches().max().unwrap() {
            for len in 1..=profile.max_len() {
                let shape = PaddedShape { len, batch };
                let base = profile.latency(shape);
                assert_eq!(table.get(shape, ShapeKind::Fixed), Some(base), "{shape:?}");
                assert_eq!(table.get(shape, ShapeKind::Dynamic), Some(penalised(base, 1.5)), "{shape:?}");
            }
        }
        let past = PaddedShape { len: profile.max_len() + 1, batch: 1 };
        assert_eq!(table.get(past, ShapeKind::Fixed), None, "past the largest length");
        assert!(PriceTable::new(&flat_profile(1.0, 4), 1.0).is_some());
    }
}
