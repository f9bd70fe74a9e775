//! How burstiness propagates along the pipeline: Whitt's QNA departure approximation stands in
//! for QUART's untrained graph-attention model (Eq. 4–6; spec §1.5 [R]), and a stage's measured
//! CV replaces the prediction once it rests on enough arrivals.

/// The squared CV of departures from a stage of `replicas` replicas at utilisation `rho`,
/// given the squared CVs of its arrivals `ca2` and service `cs2`:
/// c_d² = 1 + (1 − ρ²)(c_a² − 1) + ρ²·(c_s² − 1)/√r.
pub fn departure_cv2(ca2: f64, cs2: f64, rho: f64, replicas: u32) -> f64 {
    let rho2 = rho.clamp(0.0, 1.0).powi(2);
    let r = f64::from(replicas.max(1));
    (1.0 + (1.0 - rho2) * (ca2 - 1.0) + rho2 * (cs2 - 1.0) / r.sqrt()).max(0.0)
}

/// One stage as QNA sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StageFlow {
    pub rho: f64,
    pub replicas: u32,
    /// CV of the stage's service time.
    pub cs: f64,
    /// The stage's measured arrival CV and how many gaps it rests on.
    pub measured: Option<(f64, usize)>,
}

/// The arrival CV of every stage (ĈV_i), stage 0's from `ingress_cv`: QNA's c_a,i+1 = c_d,i,
/// except that a stage's measured CV is used once it rests on `enough` gaps.
pub fn arrival_cvs(ingress_cv: f64, stages: &[StageFlow], enough: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(stages.len());
    let mut predicted = ingress_cv;
    for s in stages {
        let cv = match s.measured {
            Some((cv, n)) if n >= enough => cv,
            _ => predicted,
        };
        out.push(cv);
        predicted = departure_cv2(cv * cv, s.cs * s.cs, s.rho, s.replicas).sqrt();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poisson_through_exponential_stays_poisson_and_deterministic_service_smooths() {
        assert!((departure_cv2(1.0, 1.0, 0.7, 1) - 1.0).abs() < 1e-12);
        // A busy deterministic single server makes departures regular.
        assert!(departure_cv2(1.0, 0.0, 0.9, 1) < 0.2);
        // A lightly loaded stage passes its arrivals' burstiness on.
        assert!((departure_cv2(16.0, 0.0, 0.1, 1) - (1.0 + 0.99 * 15.0 - 0.01)).abs() < 1e-9);
    }

    #[test]
    fn measured_cv_replaces_the_prediction_once_it_rests_on_enough_gaps() {
        let flow = |measured| StageFlow { rho: 0.9, replicas: 1, cs: 0.0, measured };
        let cvs = arrival_cvs(1.0, &[flow(None), flow(Some((3.0, 10))), flow(Some((3.0, 500)))], 200);
        assert_eq!(cvs[0], 1.0);
        assert!(cvs[1] < 0.5, "predicted from stage 0: {}", cvs[1]);
        assert_eq!(cvs[2], 3.0);
    }
}
