//! The critical stage and the flow it sets (Morph's reading of QUART's key stages for a chain):
//! the stage whose own queueing need is the largest flow, n_j / s_j requests per second, is
//! critical; every stage is provisioned to carry that flow, r_i ≥ ⌈flow · s_i⌉. A stage given
//! fewer replicas than the flow it receives only moves the critical stage's queue down the
//! pipeline, and one given more than the flow that reaches it idles.

/// Raises every `needs[i]` to carry the critical stage's flow (capped at `cap`); returns the
/// critical stage's index, `None` for an empty pipeline. `service[i]` is s_i in seconds.
pub fn carry_critical_flow(needs: &mut [u32], service: &[f64], cap: u32) -> Option<usize> {
    let flow = |j: usize| f64::from(needs[j]) / service[j].max(f64::MIN_POSITIVE);
    let critical = (0..needs.len()).max_by(|&a, &b| flow(a).total_cmp(&flow(b)).then(b.cmp(&a)))?;
    let carried = flow(critical);
    for (need, s) in needs.iter_mut().zip(service) {
        // The tolerance keeps equal stages at equal counts despite rounding in s_i.
        let replicas = (carried * s - 1e-9).ceil().min(f64::from(cap)) as u32;
        *need = (*need).max(replicas);
    }
    Some(critical)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stage_carries_the_critical_flow_in_proportion_to_its_service_time() {
        // Stage 1 needs 6 replicas of 20 ms (300 req/s); stage 0 (10 ms) needs 3 to carry it,
        // stage 2 (40 ms) 12, capped at 10.
        let mut needs = vec![2, 6, 4];
        assert_eq!(carry_critical_flow(&mut needs, &[0.010, 0.020, 0.040], 10), Some(1));
        assert_eq!(needs, vec![3, 6, 10]);
    }

    #[test]
    fn equal_stages_end_equal_and_the_first_of_equals_is_critical() {
        let mut needs = vec![4, 6, 6, 3];
        assert_eq!(carry_critical_flow(&mut needs, &[0.018; 4], 8), Some(1));
        assert_eq!(needs, vec![6, 6, 6, 6]);
        assert_eq!(carry_critical_flow(&mut [], &[], 8), None);
    }
}
