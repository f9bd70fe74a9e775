//! The outlier channels of each weight product's input in an int8 graph.
//!
//! `DynamicQuantizeMatMul` quantises an activation with one scale per tensor, and a few input
//! channels can be far larger than the rest (all-MiniLM-L6-v2's feed-forward input: three to
//! five channels per layer reach 6.5–30 where the median channel peaks near 1.8), so those
//! channels would set the step for all of them. As LLM.int8() does (Dettmers et al., 2022, its
//! mixed-precision decomposition), the channels that reach the outlier magnitude are computed
//! in fp32 and the rest in int8: Y = X_O·W_O + X_R·W_R. Here the channels are found once, by
//! calibration on text, rather than per batch.
//!
//! SmoothQuant's per-channel rescaling was tried first and lost accuracy at every α tried
//! (0.15–0.75): with weights quantised per output column, a rescaled outlier row sets every
//! column's step.

/// LLM.int8()'s outlier threshold: a channel whose |value| reaches 6 is an outlier.
pub const OUTLIER_MAGNITUDE: f32 = 6.0;

/// The weight products of an encoder layer, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Product {
    /// Query, key and value, one product.
    Qkv,
    AttentionOutput,
    /// The feed-forward up projection.
    Up,
    /// The feed-forward down projection.
    Down,
}

impl Product {
    pub const ALL: [Product; 4] = [Self::Qkv, Self::AttentionOutput, Self::Up, Self::Down];

    pub fn name(self) -> &'static str {
        match self {
            Self::Qkv => "qkv",
            Self::AttentionOutput => "attention_output",
            Self::Up => "up",
            Self::Down => "down",
        }
    }
}

/// Which product of which layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Site {
    pub layer: usize,
    pub product: Product,
}

/// Each layer's outlier input channels of each product, ascending.
#[derive(Debug, Clone, PartialEq)]
pub struct Outliers {
    /// `[layer][product]`, products in [`Product::ALL`] order.
    channels: Vec<Vec<Vec<usize>>>,
}

impl Outliers {
    /// From the largest |value| each input channel took in calibration, `[layer][product]`.
    pub fn from_maxima(maxima: &[Vec<Vec<f32>>]) -> Self {
        let outlying = |m: &Vec<f32>| (0..m.len()).filter(|&j| m[j] >= OUTLIER_MAGNITUDE).collect();
        Self { channels: maxima.iter().map(|layer| layer.iter().map(outlying).collect()).collect() }
    }

    /// Layers calibrated.
    pub fn layers(&self) -> usize {
        self.channels.len()
    }

    /// The outlier channels of the product at `site` (empty past the layers calibrated).
    pub fn channels(&self, site: Site) -> &[usize] {
        let index = Product::ALL.iter().position(|p| *p == site.product).unwrap_or_default();
        self.channels.get(site.layer).and_then(|l| l.get(index)).map_or(&[], Vec::as_slice)
    }
}

/// `w` (`[in, out]`, row-major) split by input channel: the rows of `outliers` (`[k, out]`),
/// and `w` with those rows zeroed.
pub fn split_rows(w: &[f32], cols: usize, outliers: &[usize]) -> (Vec<f32>, Vec<f32>) {
    let mut rest = w.to_vec();
    let mut picked = Vec::with_capacity(outliers.len() * cols);
    for &j in outliers {
        picked.extend_from_slice(&w[j * cols..(j + 1) * cols]);
        rest[j * cols..(j + 1) * cols].fill(0.0);
    }
    (picked, rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_reaching_the_threshold_are_outliers() {
        let layer = |down: Vec<f32>| vec![vec![7.0, 1.0], vec![0.0], vec![0.0], down];
        let outliers = Outliers::from_maxima(&[layer(vec![1.0, 6.0, 5.9, 24.7]), layer(vec![0.5, 2.0])]);
        let at = |layer, product| Site { layer, product };
        assert_eq!(outliers.layers(), 2);
        assert_eq!(outliers.channels(at(0, Product::Down)), &[1, 3]);
        assert_eq!(outliers.channels(at(1, Product::Qkv)), &[0]);
        assert!(outliers.channels(at(1, Product::Down)).is_empty());
        assert!(
            outliers.channels(at(0, Product::Up)).is_empty()
                && outliers.channels(at(7, Product::Qkv)).is_empty()
        );
    }

    #[test]
    fn the_split_rows_sum_back_to_the_weight() {
        // Three input channels, two output columns; channel 1 is the outlier.
        let w = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let (picked, rest) = split_rows(&w, 2, &[1]);
        assert_eq!(picked, vec![3.0, 4.0]);
        assert_eq!(rest, vec![1.0, 2.0, 0.0, 0.0, 5.0, 6.0]);
    }
}
