//! The outlier channels of each weight product's input in an int8 graph, and their splitting.
//!
//! An int8 product quantises each token's activations with one scale, set by its largest value
//! ([`super::precision::row_quantized_product`]), and a few input channels can be far larger
//! than the rest in nearly every token (all-MiniLM-L6-v2's feed-forward input: three to five
//! channels per layer reach 6.5–30 where the median channel peaks near 1.8), so those channels
//! would set the step for all of them. Each such channel is split into copies that
//! stay within the outlier magnitude, as outlier channel splitting does (OCS, Zhao et al.,
//! 2019): channel j with calibrated peak m_j becomes c_j = ⌊m_j / 6⌋ + 1 input channels holding
//! x_j / c_j, each multiplying W's row j, so Σ (x_j / c_j)·W_j = x_j·W_j and the product keeps
//! its value while a row's range, hence its step, is that of the ordinary channels. The
//! channels are found once, by calibration on text, rather than per batch.
//!
//! Tried before: LLM.int8()'s decomposition (Y = X_O·W_O + X_R·W_R, the outliers in fp32 beside
//! the int8 product) was as accurate but its thin fp32 product, a gather and a zeroing cost a
//! fifth of an AG News batch's kernel time; SmoothQuant's per-channel rescaling lost accuracy at
//! every α tried (0.15–0.75): with weights quantised per output column, a rescaled outlier row
//! sets every column's step.

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

/// An input channel that reaches [`OUTLIER_MAGNITUDE`], and how many copies it is split into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Outlier {
    pub channel: usize,
    /// c_j = ⌊m_j / 6⌋ + 1 for its calibrated peak m_j: each copy's peak m_j / c_j is below 6.
    pub copies: usize,
}

impl Outlier {
    fn of_peak(channel: usize, peak: f32) -> Option<Self> {
        (peak >= OUTLIER_MAGNITUDE)
            .then(|| Self { channel, copies: (peak / OUTLIER_MAGNITUDE).floor() as usize + 1 })
    }
}

/// Each layer's outlier input channels of each product, ascending.
#[derive(Debug, Clone, PartialEq)]
pub struct Outliers {
    /// `[layer][product]`, products in [`Product::ALL`] order.
    channels: Vec<Vec<Vec<Outlier>>>,
}

impl Outliers {
    /// From the largest |value| each input channel took in calibration, `[layer][product]`.
    pub fn from_maxima(maxima: &[Vec<Vec<f32>>]) -> Self {
        let outlying =
            |m: &Vec<f32>| m.iter().enumerate().filter_map(|(j, &peak)| Outlier::of_peak(j, peak)).collect();
        Self { channels: maxima.iter().map(|layer| layer.iter().map(outlying).collect()).collect() }
    }

    /// Layers calibrated.
    pub fn layers(&self) -> usize {
        self.channels.len()
    }

    /// The outlier channels of the product at `site` (empty past the layers calibrated).
    pub fn channels(&self, site: Site) -> &[Outlier] {
        let index = Product::ALL.iter().position(|p| *p == site.product).unwrap_or_default();
        self.channels.get(site.layer).and_then(|l| l.get(index)).map_or(&[], Vec::as_slice)
    }
}

/// A product `X·W` with its outlier input channels split: `X·W = [X ⊙ scale, (X ⊙ scale)[:, extra]]
/// · weight`.
#[derive(Debug, Clone, PartialEq)]
pub struct SplitChannels {
    /// Per input channel: 1, or 1 / c_j for an outlier.
    pub scale: Vec<f32>,
    /// The input channels appended after the `in` channels: c_j − 1 more of each outlier.
    pub extra: Vec<usize>,
    /// `[in + extra.len(), out]`, row-major: `w`, then W's row j for each extra channel j.
    pub weight: Vec<f32>,
}

/// Splits the outlier channels of the product of `w` (`[in, out]`, row-major, `cols` = out).
pub fn split_channels(w: &[f32], cols: usize, outliers: &[Outlier]) -> SplitChannels {
    let mut scale = vec![1.0; w.len() / cols];
    let mut extra = Vec::new();
    let mut weight = w.to_vec();
    for o in outliers {
        scale[o.channel] = 1.0 / o.copies as f32;
        for _ in 1..o.copies {
            extra.push(o.channel);
            weight.extend_from_slice(&w[o.channel * cols..(o.channel + 1) * cols]);
        }
    }
    SplitChannels { scale, extra, weight }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_reaching_the_threshold_are_outliers_split_below_it() {
        let layer = |down: Vec<f32>| vec![vec![7.0, 1.0], vec![0.0], vec![0.0], down];
        let outliers = Outliers::from_maxima(&[layer(vec![1.0, 6.0, 5.9, 24.7]), layer(vec![0.5, 2.0])]);
        let at = |layer, product| Site { layer, product };
        let o = |channel, copies| Outlier { channel, copies };
        assert_eq!(outliers.layers(), 2);
        assert_eq!(outliers.channels(at(0, Product::Down)), &[o(1, 2), o(3, 5)]);
        assert_eq!(outliers.channels(at(1, Product::Qkv)), &[o(0, 2)]);
        assert!(outliers.channels(at(1, Product::Down)).is_empty());
        assert!(
            outliers.channels(at(0, Product::Up)).is_empty()
                && outliers.channels(at(7, Product::Qkv)).is_empty()
        );
        for (peak, o) in [(6.0, o(1, 2)), (24.7, o(3, 5)), (7.0, o(0, 2))] {
            assert!(peak / (o.copies as f32) < OUTLIER_MAGNITUDE, "{peak} in {} copies", o.copies);
        }
    }

    #[test]
    fn split_channels_compute_the_product_they_split() {
        // x [2, 3] · w [3, 2]; channel 1 split in 3, channel 2 in 2.
        let (x, w) = ([1.0, 17.0, -9.0, 0.5, -12.0, 7.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let split =
            split_channels(&w, 2, &[Outlier { channel: 1, copies: 3 }, Outlier { channel: 2, copies: 2 }]);
        assert_eq!(split.extra, vec![1, 1, 2]);
        let product = |x: &[f32], w: &[f32]| -> Vec<f32> {
            let k = x.len() / 2;
            (0..4).map(|i| (0..k).map(|j| x[i / 2 * k + j] * w[j * 2 + i % 2]).sum()).collect()
        };
        let widened: Vec<f32> = x
            .chunks(3)
            .flat_map(|row| {
                let scaled: Vec<f32> = row.iter().zip(&split.scale).map(|(v, s)| v * s).collect();
                let extra = split.extra.iter().map(|&j| scaled[j]).collect::<Vec<_>>();
                scaled.into_iter().chain(extra)
            })
            .collect();
        let (whole, splitted) = (product(&x, &w), product(&widened, &split.weight));
        for (a, b) in whole.iter().zip(&splitted) {
            assert!((a - b).abs() < 1e-4, "{whole:?} vs {splitted:?}");
        }
        assert!(widened.iter().all(|v| v.abs() < OUTLIER_MAGNITUDE), "{widened:?}");
    }
}
