//! A latency model fitted to a few measured shapes, so that a first start on a new host measures
//! for seconds instead of minutes:
//!
//! t(b, l) = c₀ + c₁·b + c₂·b·l + c₃·b·l²   (ms)
//!
//! a call's fixed cost, a per-row cost, the per-token products (linear in the tokens) and
//! attention's scores (quadratic in the length). The coefficients are fitted by least squares
//! on relative error, each ≥ 0 (of every subset of the terms, the best fit whose coefficients
//! are all non-negative), so the model grows with both batch and length.

use crate::latency_profile::{LatencyProfile, Point, ProfileError};

/// The model's terms at one shape.
const TERMS: usize = 4;

fn terms(batch: u32, len: u32) -> [f64; TERMS] {
    let (b, l) = (f64::from(batch), f64::from(len));
    [1.0, b, b * l, b * l * l]
}

/// Fitted coefficients of the model in the module doc.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencyFit {
    coef: [f64; TERMS],
}

impl LatencyFit {
    /// The best non-negative fit to `points` (relative error), or `None` with fewer points than
    /// terms or latencies that are not positive.
    pub fn fit(points: &[Point]) -> Option<Self> {
        if points.len() < TERMS || points.iter().any(|p| !(p.ms > 0.0 && p.ms.is_finite())) {
            return None;
        }
        let mut best: Option<(f64, Self)> = None;
        for subset in 1..(1u32 << TERMS) {
            let used: Vec<usize> = (0..TERMS).filter(|&t| subset & (1 << t) != 0).collect();
            let Some(fit) = least_squares(points, &used) else { continue };
            if fit.coef.iter().any(|&c| c < 0.0) {
                continue;
            }
            let residual = fit.relative_residual(points);
            if best.as_ref().is_none_or(|(r, _)| residual < *r) {
                best = Some((residual, fit));
            }
        }
        best.map(|(_, fit)| fit)
    }

    /// The model's latency in ms of a batch of `batch` rows of `len` tokens.
    pub fn ms(&self, batch: u32, len: u32) -> f64 {
        terms(batch, len).iter().zip(self.coef).map(|(x, c)| x * c).sum()
    }

    /// The largest relative error of the model on `points`.
    pub fn worst_error(&self, points: &[Point]) -> f64 {
        points.iter().map(|p| (self.ms(p.batch, p.len) / p.ms - 1.0).abs()).fold(0.0, f64::max)
    }

    /// A profile of the model over the grid `batches` × `lens`.
    pub fn profile(
        &self,
        model: &str,
        batches: &[u32],
        lens: &[u32],
    ) -> Result<LatencyProfile, ProfileError> {
        let grid = batches.iter().flat_map(|&batch| lens.iter().map(move |&len| (batch, len)));
        LatencyProfile::from_points(
            model,
            grid.map(|(batch, len)| Point { batch, len, ms: self.ms(batch, len) }),
        )
    }

    /// Sum of squared relative errors.
    fn relative_residual(&self, points: &[Point]) -> f64 {
        points.iter().map(|p| (self.ms(p.batch, p.len) / p.ms - 1.0).powi(2)).sum()
    }
}

/// Least squares on relative error over the terms `used` (the others 0): each row divided by
/// its latency, each column scaled to unit size (b·l² is millions where 1 is one), normal
/// equations solved by elimination; `None` if they are singular.
fn least_squares(points: &[Point], used: &[usize]) -> Option<LatencyFit> {
    let n = used.len();
    let rows: Vec<Vec<f64>> =
        points.iter().map(|p| used.iter().map(|&t| terms(p.batch, p.len)[t] / p.ms).collect()).collect();
    let scale: Vec<f64> =
        (0..n).map(|j| rows.iter().map(|r| r[j] * r[j]).sum::<f64>().sqrt().max(f64::MIN_POSITIVE)).collect();
    // [AᵀA | Aᵀy] with A the scaled rows and y = 1 (each latency divided by itself).
    let mut system = vec![vec![0.0; n + 1]; n];
    for row in &rows {
        for i in 0..n {
            for j in 0..n {
                system[i][j] += row[i] / scale[i] * row[j] / scale[j];
            }
            system[i][n] += row[i] / scale[i];
        }
    }
    let solved = solve(system)?;
    let mut coef = [0.0; TERMS];
    for (k, &t) in used.iter().enumerate() {
        coef[t] = solved[k] / scale[k];
    }
    Some(LatencyFit { coef })
}

/// Gaussian elimination with partial pivoting on an augmented n × (n + 1) system.
fn solve(mut m: Vec<Vec<f64>>) -> Option<Vec<f64>> {
    let n = m.len();
    for col in 0..n {
        let pivot = (col..n).max_by(|&a, &b| m[a][col].abs().total_cmp(&m[b][col].abs()))?;
        if m[pivot][col].abs() < 1e-12 {
            return None;
        }
        m.swap(col, pivot);
        let (upper, lower) = m.split_at_mut(col + 1);
        let pivot_row = &upper[col];
        for row in lower {
            let factor = row[col] / pivot_row[col];
            for (x, p) in row[col..].iter_mut().zip(&pivot_row[col..]) {
                *x -= factor * p;
            }
        }
    }
    let mut x = vec![0.0; n];
    for row in (0..n).rev() {
        let known: f64 = (row + 1..n).map(|k| m[row][k] * x[k]).sum();
        x[row] = (m[row][n] - known) / m[row][row];
    }
    Some(x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PaddedShape;

    fn point(batch: u32, len: u32, ms: f64) -> Point {
        Point { batch, len, ms }
    }

    #[test]
    fn a_latency_of_the_models_form_is_recovered() {
        let truth = LatencyFit { coef: [0.8, 0.3, 0.02, 4e-5] };
        let shapes = [(1, 8), (1, 64), (1, 512), (2, 512), (4, 32), (4, 256), (16, 16), (16, 128)];
        let points: Vec<Point> = shapes.iter().map(|&(b, l)| point(b, l, truth.ms(b, l))).collect();
        let fit = LatencyFit::fit(&points).unwrap();
        for (b, l) in [(8, 64), (16, 512), (2, 8)] {
            assert!((fit.ms(b, l) / truth.ms(b, l) - 1.0).abs() < 1e-6, "b{b} l{l}: {fit:?}");
        }
        assert!(fit.worst_error(&points) < 1e-6);
    }

    #[test]
    fn a_fit_never_has_a_negative_term() {
        // Flat in the batch at short lengths (one call's overhead) and steep at long ones: an
        // unconstrained fit would take a negative per-row cost.
        let points = [
            point(1, 8, 3.0),
            point(16, 8, 3.2),
            point(1, 512, 50.0),
            point(16, 512, 900.0),
            point(4, 64, 9.0),
        ];
        let fit = LatencyFit::fit(&points).unwrap();
        assert!(fit.coef.iter().all(|&c| c >= 0.0), "{fit:?}");
        for (b, l) in [(1, 8), (2, 16), (16, 512)] {
            assert!(fit.ms(b + 1, l) >= fit.ms(b, l) && fit.ms(b, l + 1) >= fit.ms(b, l));
        }
    }

    #[test]
    fn too_few_or_bad_points_have_no_fit() {
        assert_eq!(LatencyFit::fit(&[point(1, 8, 1.0), point(2, 8, 2.0), point(4, 8, 4.0)]), None);
        let zero = [point(1, 8, 0.0), point(2, 8, 2.0), point(4, 8, 4.0), point(8, 8, 8.0)];
        assert_eq!(LatencyFit::fit(&zero), None);
    }

    #[test]
    fn the_profile_of_a_fit_holds_its_latency_at_every_grid_shape() {
        let fit = LatencyFit { coef: [1.0, 0.5, 0.01, 0.0] };
        let profile = fit.profile("m", &[1, 4], &[8, 64]).unwrap();
        assert_eq!(profile.batches().collect::<Vec<_>>(), vec![1, 4]);
        let at = |batch, len| profile.latency_ms(PaddedShape { batch, len });
        assert!((at(4, 64) - fit.ms(4, 64)).abs() < 1e-9);
        assert!((at(1, 8) - fit.ms(1, 8)).abs() < 1e-9);
    }
}
