//! What a runtime can serve within the SLO, from the latency profile: its service time s_i,
//! its capacity M_i and its load → mean latency curve L_i (Arlo §3.3, "obtained by profiling").

use std::sync::Arc;

use morph_core::{Nanos, PaddedShape, Profile, RuntimeSpec};

/// Utilisation up to which L_i follows M/D/1; beyond it, L_i goes on as a straight line with
/// the slope it has there (finite and non-decreasing, which the allocator needs).
const RHO_KNEE: f64 = 0.95;

#[derive(Debug, Clone)]
pub struct ServiceModel {
    profile: Arc<Profile>,
    slo: Nanos,
}

impl ServiceModel {
    pub fn new(profile: Arc<Profile>, slo: Nanos) -> Self {
        Self { profile, slo: slo.max(1) }
    }

    pub fn slo(&self) -> Nanos {
        self.slo
    }

    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// s_i in ms: one full batch at the runtime's longest length (what a fixed runtime always
    /// pays; the worst case for a dynamic one).
    pub fn service_ms(&self, runtime: RuntimeSpec) -> f64 {
        self.profile.latency_ms(PaddedShape { len: runtime.max_len, batch: runtime.max_batch })
    }

    /// M_i: the most requests one instance finishes back to back within the SLO.
    pub fn capacity(&self, runtime: RuntimeSpec) -> u32 {
        let slo_ms = self.slo as f64 / 1e6;
        let batches = (slo_ms / self.service_ms(runtime)).floor();
        (batches * f64::from(runtime.max_batch)).max(1.0) as u32
    }

    /// L_i(B): mean latency in ms of an instance offered B requests per SLO period, as an M/D/1
    /// queue (Poisson arrivals, deterministic service): s + ρ·s / (2(1 − ρ)), ρ = B·s/(SLO·batch).
    pub fn mean_latency_ms(&self, runtime: RuntimeSpec, load: f64) -> f64 {
        let s = self.service_ms(runtime);
        let per_request_ms = s / f64::from(runtime.max_batch);
        let rho = load * per_request_ms / (self.slo as f64 / 1e6);
        let md1 = |rho: f64| s + rho * s / (2.0 * (1.0 - rho));
        if rho <= RHO_KNEE {
            md1(rho)
        } else {
            let slope = s / (2.0 * (1.0 - RHO_KNEE).powi(2));
            md1(RHO_KNEE) + slope * (rho - RHO_KNEE)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use morph_core::Point;

    #[test]
    fn capacity_and_latency_from_the_profile() {
        let p = Profile::from_points(
            "m",
            [Point { batch: 1, len: 64, ms: 2.0 }, Point { batch: 1, len: 512, ms: 10.0 }],
        )
        .unwrap();
        let m = ServiceModel::new(Arc::new(p), 100_000_000);
        let (short, long) = (RuntimeSpec::fixed(64, 1), RuntimeSpec::fixed(512, 1));
        assert_eq!((m.capacity(short), m.capacity(long)), (50, 10));
        // Idle: the service time. Half loaded (ρ = 0.5): s + s/2.
        assert!((m.mean_latency_ms(long, 0.0) - 10.0).abs() < 1e-12);
        assert!((m.mean_latency_ms(long, 5.0) - 15.0).abs() < 1e-12);
        // Past the knee it keeps growing, finitely.
        let (a, b) = (m.mean_latency_ms(long, 9.9), m.mean_latency_ms(long, 20.0));
        assert!(a.is_finite() && b > a);
    }
}
