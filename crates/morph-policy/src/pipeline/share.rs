//! Scarce slots shared across stages by need: when the stages ask for more replicas than the
//! cluster has slots, each keeps a share of the slots in proportion to what it asked for (the
//! largest remainders get the slots left over), and none falls below the floor. No stage is
//! starved behind the others, whatever its index.

/// Counts that fit `slots`: `wants` unchanged when they fit, else shares in proportion to them,
/// each at least `floor` (when even the floors do not fit, every stage gets its floor).
pub fn share_slots(wants: &[u32], slots: u32, floor: u32) -> Vec<u32> {
    let asked: u64 = wants.iter().map(|&w| u64::from(w)).sum();
    if asked <= u64::from(slots) || wants.is_empty() {
        return wants.to_vec();
    }
    let floors: Vec<u32> = wants.iter().map(|&w| w.min(floor)).collect();
    let spare = slots.saturating_sub(floors.iter().sum());
    let above: Vec<u32> = wants.iter().zip(&floors).map(|(w, f)| w - f).collect();
    let total_above: u64 = above.iter().map(|&a| u64::from(a)).sum::<u64>().max(1);
    // Each stage's exact share of the spare slots above its floor, floored, then the remainders.
    let exact: Vec<f64> =
        above.iter().map(|&a| f64::from(a) * f64::from(spare) / total_above as f64).collect();
    let mut out: Vec<u32> = floors.iter().zip(&exact).map(|(f, e)| f + e.floor() as u32).collect();
    let mut left = slots.saturating_sub(out.iter().sum());
    let mut order: Vec<usize> = (0..wants.len()).collect();
    // Largest remainder first; of equal ones, the stage that asked for more.
    let remainder = |i: usize| exact[i] - exact[i].floor();
    order.sort_by(|&a, &b| {
        remainder(b).total_cmp(&remainder(a)).then(wants[b].cmp(&wants[a])).then(a.cmp(&b))
    });
    for i in order {
        if left == 0 {
            break;
        }
        if out[i] < wants[i] {
            out[i] += 1;
            left -= 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_that_fit_are_kept() {
        assert_eq!(share_slots(&[3, 4, 5], 12, 1), vec![3, 4, 5]);
    }

    #[test]
    fn scarce_slots_go_in_proportion_to_need_and_no_stage_is_starved() {
        // 8 stages asking 8 each on 32 slots: 4 each, not 8 for the first four.
        assert_eq!(share_slots(&[8; 8], 32, 1), vec![4; 8]);
        // A stage asking twice as much gets about twice the share.
        let got = share_slots(&[2, 8, 2, 8], 12, 1);
        assert_eq!(got.iter().sum::<u32>(), 12);
        assert_eq!(got, vec![1, 5, 1, 5]);
        // The floor holds even for a stage that asks little.
        let got = share_slots(&[1, 20, 20], 10, 1);
        assert_eq!(got[0], 1);
        assert_eq!(got.iter().sum::<u32>(), 10);
    }

    #[test]
    fn floors_that_do_not_fit_are_kept_whole() {
        assert_eq!(share_slots(&[4, 4, 4], 2, 1), vec![1, 1, 1]);
    }
}
