//! A model's int8 weight products, prepared once for every graph written from it. Each graph
//! (an instance, a runtime's shape, a token plan, a profiled point) needs the same products:
//! the checkpoint's weights transposed, their outlier channels split, quantised and laid out for
//! the kernel. Made anew per graph that was most of the graph's writing (2.8 s of each of
//! all-mpnet-base-v2's on 2 cores); kept here, a later graph copies them.
//!
//! A product is known by its name, which names its checkpoint weights, so the products of one
//! model only are kept together (an [`crate::OrtEncoder`] holds its own); with them its outlier
//! channels and the kernel, which change the constants. They take about a byte per weight
//! (the int8 values) for as long as their holder lives.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::outliers::{Outlier, split_channels};
use super::precision::{IntegerKernel, QuantizedWeights};
use morph_engine::EngineError;

/// The int8 products prepared for one model, by [`ProductKey`].
#[derive(Debug, Default)]
pub struct PreparedProducts(Mutex<HashMap<ProductKey, Slot>>);

/// One product's place: empty until its first writer has prepared it. A writer holds it while
/// it prepares, so one that wants the same product meanwhile (the instances of a deployment are
/// compiled at once) waits for it instead of preparing it again.
type Slot = Arc<Mutex<Option<Arc<PreparedProduct>>>>;

/// What a product's constants depend on, the model aside.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ProductKey {
    name: String,
    kernel: IntegerKernel,
    outliers: Vec<Outlier>,
}

/// A `Linear`'s weight `[in, out]` (`dims`, values row-major) and bias.
pub(super) struct LinearWeights {
    pub dims: [usize; 2],
    pub w: Vec<f32>,
    pub b: Vec<f32>,
}

/// One product's constants, as every graph that takes it holds them.
#[derive(Debug)]
pub(super) struct PreparedProduct {
    pub weights: QuantizedWeights,
    /// Each input channel's scale (1, or 1 / c_j for an outlier) and the channels copied after
    /// the row, where the product has outliers.
    pub split: Option<(Vec<f32>, Vec<i64>)>,
    pub bias: Vec<f32>,
}

impl PreparedProduct {
    /// `linear`'s weight with its `outliers` input channels split, quantised for `kernel`.
    fn of(linear: LinearWeights, outliers: &[Outlier], kernel: IntegerKernel) -> Self {
        let LinearWeights { dims: [rows, cols], w, b } = linear;
        let split = split_channels(&w, cols, outliers);
        let weights = QuantizedWeights::of(&split.weight, [rows + split.extra.len(), cols], kernel);
        let extra: Vec<i64> = split.extra.iter().map(|&j| j as i64).collect();
        let split = (!extra.is_empty()).then_some((split.scale, extra));
        Self { weights, split, bias: b }
    }
}

impl PreparedProducts {
    /// The product `name` with `outliers` on `kernel`: the one kept, else prepared from the
    /// weights `linear` reads and kept.
    pub(super) fn get_or_prepare(
        &self,
        name: &str,
        outliers: &[Outlier],
        kernel: IntegerKernel,
        linear: impl FnOnce() -> Result<LinearWeights, EngineError>,
    ) -> Result<Arc<PreparedProduct>, EngineError> {
        let key = ProductKey { name: name.to_string(), kernel, outliers: outliers.to_vec() };
        let slot = Arc::clone(self.slots().entry(key).or_default());
        let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(kept) = slot.as_ref() {
            return Ok(Arc::clone(kept));
        }
        let prepared = Arc::new(PreparedProduct::of(linear()?, outliers, kernel));
        *slot = Some(Arc::clone(&prepared));
        Ok(prepared)
    }

    /// How many products are kept.
    pub fn len(&self) -> usize {
        let slots = self.slots();
        slots.values().filter(|slot| slot.lock().unwrap_or_else(PoisonError::into_inner).is_some()).count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<ProductKey, Slot>> {
        // A panic while a lock was held leaves what it guards whole (each change is one call).
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
