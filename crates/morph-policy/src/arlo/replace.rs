//! Instance replacement (§4): from the current deployment to a new allocation, replace the
//! fewest instances. Each runtime with more instances than its target gives up its surplus,
//! least loaded first; each one with fewer receives them. Σ surplus replacements is the
//! minimum: one replacement lowers one runtime's count by one and raises another's by one.
//! The order spreads the replacements over the runtimes that give instances up.

use std::collections::BTreeMap;

use morph_core::{InstanceId, RuntimeSpec};

/// `(instance, the runtime it becomes)`, least disruptive first.
pub type Plan = Vec<(InstanceId, RuntimeSpec)>;

/// Instances of one runtime as (outstanding, id, runtime).
type Group = Vec<(usize, InstanceId, RuntimeSpec)>;

/// `current`: every instance with its runtime and outstanding requests; `target`: instances
/// wanted per runtime (absent runtimes want none). The plan has Σ max(0, have − want) steps;
/// if the totals differ, only as many as both sides allow.
pub fn plan(current: &[(InstanceId, RuntimeSpec, usize)], target: &[(RuntimeSpec, usize)]) -> Plan {
    let mut by_runtime: BTreeMap<(u32, u32, u32), Group> = BTreeMap::new();
    for &(id, runtime, load) in current {
        by_runtime.entry(key(runtime)).or_default().push((load, id, runtime));
    }
    let want = |r: RuntimeSpec| target.iter().filter(|(t, _)| *t == r).map(|(_, n)| *n).sum::<usize>();
    // Surplus per runtime, least loaded first.
    let mut surplus: Vec<(usize, std::vec::IntoIter<InstanceId>)> = Vec::new();
    for group in by_runtime.values_mut() {
        group.sort_by_key(|(load, id, _)| (*load, *id));
        let n = group.len().saturating_sub(want(group[0].2));
        let ids: Vec<InstanceId> = group.iter().take(n).map(|(_, id, _)| *id).collect();
        surplus.push((group.len(), ids.into_iter()));
    }
    // Take from the runtime with the most instances left in service first, so a batch of
    // replacements thins every runtime a little rather than emptying one.
    let mut freed: Vec<InstanceId> = Vec::new();
    while let Some((left, ids)) =
        surplus.iter_mut().filter(|(_, ids)| ids.len() > 0).max_by_key(|(left, _)| *left)
    {
        freed.extend(ids.next());
        *left -= 1;
    }
    let mut receivers: Vec<RuntimeSpec> = Vec::new();
    for &(runtime, n) in target {
        let have = by_runtime.get(&key(runtime)).map_or(0, Vec::len);
        receivers.extend(std::iter::repeat_n(runtime, n.saturating_sub(have)));
    }
    freed.into_iter().zip(receivers).collect()
}

/// Orders runtimes by max length (then kind and batch) so plans are deterministic.
fn key(r: RuntimeSpec) -> (u32, u32, u32) {
    (r.max_len, u32::from(r.kind == morph_core::ShapeKind::Dynamic), r.max_batch)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(len: u32) -> RuntimeSpec {
        RuntimeSpec::fixed(len, 1)
    }

    /// A tiny deterministic generator for the property test.
    fn lcg(state: &mut u64) -> usize {
        *state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (*state >> 33) as usize
    }

    #[test]
    fn replaces_the_least_loaded_surplus_only() {
        let current = [
            (InstanceId(0), f(64), 5),
            (InstanceId(1), f(64), 1),
            (InstanceId(2), f(64), 3),
            (InstanceId(3), f(512), 0),
        ];
        let p = plan(&current, &[(f(64), 1), (f(256), 2), (f(512), 1)]);
        assert_eq!(p, vec![(InstanceId(1), f(256)), (InstanceId(2), f(256))]);
        assert!(plan(&current, &[(f(64), 3), (f(512), 1)]).is_empty(), "already there");
    }

    #[test]
    fn plans_are_minimal_and_reach_the_target() {
        let runtimes = [f(64), f(128), f(256), f(512)];
        let mut seed = 7;
        for _ in 0..500 {
            let g = 1 + lcg(&mut seed) % 12;
            let current: Vec<_> = (0..g)
                .map(|i| (InstanceId(i as u32), runtimes[lcg(&mut seed) % 4], lcg(&mut seed) % 9))
                .collect();
            let mut want = [0usize; 4];
            for _ in 0..g {
                want[lcg(&mut seed) % 4] += 1;
            }
            let target: Vec<_> = runtimes.iter().copied().zip(want).collect();
            let p = plan(&current, &target);
            let mut have = [0usize; 4];
            for (_, r, _) in &current {
                have[runtimes.iter().position(|x| x == r).unwrap()] += 1;
            }
            let minimum: usize = have.iter().zip(want).map(|(h, w)| h.saturating_sub(w)).sum();
            assert_eq!(p.len(), minimum);
            for (id, to) in &p {
                let from = current.iter().find(|c| c.0 == *id).unwrap().1;
                have[runtimes.iter().position(|x| *x == from).unwrap()] -= 1;
                have[runtimes.iter().position(|x| x == to).unwrap()] += 1;
            }
            assert_eq!(have, want);
        }
    }
}
