//! What a runtime can serve within the SLO, from the latency profile: its service time s_i,
//! its capacity M_i and its load → mean latency curve L_i (Arlo §3.3, "obtained by profiling").

use std::sync::Arc;

use morph_core::time::{Millis, Seconds, nanos_to_ms};
use morph_core::{LatencyProfile, Nanos, PaddedShape, RuntimeSpec};

use crate::queueing::{DelayModel, Load, delay};

/// Utilisation up to which L_i follows M/D/1; beyond it, L_i goes on as a straight line with
/// the slope it has there (finite and non-decreasing, which the allocator needs).
const RHO_KNEE: f64 = 0.95;
/// The stable accounting's price of overload: SLOs of latency per unit of utilisation past the
/// target.
const OVERLOAD_SLOS: f64 = 1000.0;

#[derive(Debug, Clone)]
pub struct ServiceModel {
    profile: Arc<LatencyProfile>,
    slo: Nanos,
}

impl ServiceModel {
    pub fn new(profile: Arc<LatencyProfile>, slo: Nanos) -> Self {
        Self { profile, slo: slo.max(1) }
    }

    pub fn slo(&self) -> Nanos {
        self.slo
    }

    fn slo_ms(&self) -> f64 {
        nanos_to_ms(self.slo)
    }

    pub fn profile(&self) -> &LatencyProfile {
        &self.profile
    }

    /// s_i in ms: one full batch at the runtime's longest length (what a fixed runtime always
    /// pays; the worst case for a dynamic one).
    pub fn service_ms(&self, runtime: RuntimeSpec) -> f64 {
        self.profile.latency_ms(PaddedShape { len: runtime.max_len, batch: runtime.max_batch })
    }

    /// M_i: the most requests one instance finishes back to back within the SLO.
    pub fn capacity(&self, runtime: RuntimeSpec) -> u32 {
        let slo_ms = self.slo_ms();
        let batches = (slo_ms / self.service_ms(runtime)).floor();
        (batches * f64::from(runtime.max_batch)).max(1.0) as u32
    }

    /// ρ of an instance offered `load` requests per SLO period.
    fn utilisation(&self, runtime: RuntimeSpec, load: f64) -> f64 {
        load * self.service_ms(runtime) / f64::from(runtime.max_batch) / self.slo_ms()
    }

    /// M/D/1 mean latency at utilisation ρ < 1 (Poisson arrivals, deterministic service s).
    fn md1_ms(&self, runtime: RuntimeSpec, rho: f64) -> f64 {
        let s = self.service_ms(runtime);
        s + rho * s / (2.0 * (1.0 - rho))
    }

    /// L_i(B): mean latency in ms of an instance offered B requests per SLO period, as an M/D/1
    /// queue (Poisson arrivals, deterministic service): s + ρ·s / (2(1 − ρ)), ρ = B·s/(SLO·batch).
    pub fn mean_latency_ms(&self, runtime: RuntimeSpec, load: f64) -> f64 {
        let rho = self.utilisation(runtime, load);
        if rho <= RHO_KNEE {
            self.md1_ms(runtime, rho)
        } else {
            let slope = self.service_ms(runtime) / (2.0 * (1.0 - RHO_KNEE).powi(2));
            self.md1_ms(runtime, RHO_KNEE) + slope * (rho - RHO_KNEE)
        }
    }

    /// Morph's stable accounting: M_i at utilisation `u` < 1, the requests per SLO period one
    /// instance serves while staying stable (fractional; the paper's M_i is at ρ = 1, floored).
    pub fn stable_capacity(&self, runtime: RuntimeSpec, u: f64) -> f64 {
        u * self.slo_ms() / self.service_ms(runtime) * f64::from(runtime.max_batch)
    }

    /// M/D/c mean latency of `instances` instances pooled at utilisation ρ < 1 each: late
    /// binding gives a runtime's instances one queue, so its waits are M/D/c's (Allen–Cunneen:
    /// M/M/c's wait halved for deterministic service), not M/D/1's per instance; with one
    /// instance they are the same.
    fn mdc_ms(&self, runtime: RuntimeSpec, rho: f64, instances: usize) -> f64 {
        let s = self.service_ms(runtime);
        let mu = f64::from(runtime.max_batch) / Millis(s).secs();
        let c = u32::try_from(instances.max(1)).unwrap_or(u32::MAX);
        let load = Load { lambda: rho * mu * f64::from(c), mu, replicas: c, ca: 1.0, cs: 0.0 };
        Seconds(delay(DelayModel::AllenCunneen, load)).ms()
    }

    /// Morph's stable accounting: L_i(B) of the runtime's `instances` pooled (M/D/c) up to
    /// utilisation `u`; past it, each unit of utilisation costs a thousand SLOs, so the
    /// allocator prefers any split that keeps every runtime under `u` and, among those that
    /// cannot, the least overloaded.
    pub fn stable_latency_ms(&self, runtime: RuntimeSpec, load: f64, instances: usize, u: f64) -> f64 {
        let rho = self.utilisation(runtime, load);
        if rho <= u {
            self.mdc_ms(runtime, rho, instances)
        } else {
            self.mdc_ms(runtime, u, instances) + OVERLOAD_SLOS * self.slo_ms() * (rho - u)
        }
    }
}

/// A model for tests: 1 ms at 64 tokens, 4 ms at 512, SLO 100 ms.
#[cfg(test)]
pub(super) fn two_point_model() -> ServiceModel {
    use morph_core::Point;
    let points = [Point { batch: 1, len: 64, ms: 1.0 }, Point { batch: 1, len: 512, ms: 4.0 }];
    let profile = LatencyProfile::from_points("m", points).expect("a valid profile");
    ServiceModel::new(Arc::new(profile), 100_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use morph_core::Point;

    #[test]
    fn capacity_and_latency_from_the_profile() {
        let p = LatencyProfile::from_points(
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
        // Stable accounting at u = 0.8: 8 requests per SLO; M/D/1 up to it, then 1000 SLOs (of
        // 100 ms) per unit of ρ: at ρ = 0.9, s + 0.8s/0.4 + 100 000 · 0.1.
        assert!((m.stable_capacity(long, 0.8) - 8.0).abs() < 1e-12);
        assert!((m.stable_latency_ms(long, 5.0, 1, 0.8) - 15.0).abs() < 1e-9);
        assert!((m.stable_latency_ms(long, 9.0, 1, 0.8) - (30.0 + 10_000.0)).abs() < 1e-9);
        // Pooled, two instances at ρ = 0.5 wait a third of one's M/D/1 wait: Erlang C of
        // (c = 2, a = 1) is 1/3, W = ½·(1/3)/(2μ − λ) = s/6.
        assert!((m.stable_latency_ms(long, 5.0, 2, 0.8) - (10.0 + 10.0 / 6.0)).abs() < 1e-9);
    }
}
