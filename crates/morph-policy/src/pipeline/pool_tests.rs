//! The shared executor's launches when the cluster's slots are scarce.

use morph_core::{
    Action, Event, HostId, HostSlots, InstanceId, InstanceInfo, Policy, RuntimeSpec, StageTime, StageTimes,
    Time,
};

use super::{PipelinePolicy, PlacementRule, PoolConfig, PoolView, Sizer, StageTarget};

/// A sizer that always asks for the same targets (the seam the executor is driven through).
#[derive(Debug)]
struct Asks(Vec<StageTarget>);

impl Sizer for Asks {
    fn size(&mut self, _: &PoolView<'_>) -> Vec<StageTarget> {
        self.0.clone()
    }

    fn describe(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}

/// Two stages on one host of `slots` slots, up at their initial layout (one replica of one
/// thread each), asking for `targets`.
fn pipeline(slots: u16, targets: Vec<StageTarget>) -> PipelinePolicy<Asks> {
    let mut policy = PipelinePolicy::new(
        "test",
        PoolConfig::default(),
        two_stages(),
        &HostSlots::new(1, slots),
        1_000_000_000,
        Asks(targets),
    );
    up(&mut policy, &[(0, HostId(0), 0), (1, HostId(0), 1)]);
    policy
}

fn two_stages() -> StageTimes {
    StageTimes {
        runtime: RuntimeSpec::dynamic(128, 1),
        layers: 2,
        stages: vec![StageTime { a_ms: 10.0, b_ms: 0.0 }; 2],
        hop_ms: 0.0,
    }
}

/// Replicas of one thread of each `(stage, host, instance id)` up, in order.
fn up(policy: &mut PipelinePolicy<Asks>, replicas: &[(u16, HostId, u32)]) {
    let units = policy.layout(2).expect("a layout");
    let mut actions = Vec::new();
    for &(stage, host, id) in replicas {
        let unit = units[usize::from(stage)];
        let instance = InstanceInfo { id: InstanceId(id), unit, host };
        policy.on_event(Time::ZERO, Event::InstanceUp { instance, launch: None }, &mut actions);
    }
}

/// The stages launched for at the next control period, in order, with their hosts.
fn launches(policy: &mut PipelinePolicy<Asks>) -> Vec<(u16, Option<HostId>)> {
    let mut actions = Vec::new();
    policy.on_event(Time::ZERO, Event::Tick, &mut actions);
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Launch { unit, host, .. } => Some((unit.stage_index(), *host)),
            _ => None,
        })
        .collect()
}

/// The stages launched for at the next control period, in order.
fn launched(policy: &mut PipelinePolicy<Asks>) -> Vec<u16> {
    launches(policy).into_iter().map(|(stage, _)| stage).collect()
}

#[test]
fn a_stage_below_its_target_gets_a_slot_before_another_is_rethreaded() {
    // Both stages ask for two replicas of two threads: four slots hold their targets, and the
    // one-thread replicas they start with count towards them. Re-threading a stage would take
    // the slot the other stage lacks.
    let asks = vec![StageTarget { replicas: 2, threads: 2, key: false }; 2];
    assert_eq!(launched(&mut pipeline(4, asks)), [0, 1]);
}

#[test]
fn stages_at_their_targets_rethread_one_replica_at_a_time_in_the_slots_left() {
    let asks = vec![StageTarget { replicas: 1, threads: 2, key: false }; 2];
    assert_eq!(launched(&mut pipeline(4, asks.clone())), [0, 1]);
    assert_eq!(launched(&mut pipeline(3, asks)), [0], "one free slot: one stage re-threads");
}

#[test]
fn a_burst_s_launches_are_placed_together_so_every_one_starts_warm() {
    let config =
        PoolConfig { placement: PlacementRule::CacheAware, host_cache: true, ..PoolConfig::default() };
    let asks = vec![StageTarget { replicas: 2, threads: 1, key: false }; 2];
    let mut policy =
        PipelinePolicy::new("test", config, two_stages(), &HostSlots::new(2, 2), 1_000_000_000, Asks(asks));
    // Stage 0 comes up on hosts 0 and 1, and (one replica more than its first target) the one
    // on host 0 retires: host 0 has run stages 0 and 1, host 1 only stage 0, one slot free on
    // each. Placed one stage at a time, stage 0 would take host 0 (the lowest id among its
    // cached hosts) and leave stage 1 a cold start on host 1.
    up(&mut policy, &[(1, HostId(0), 1), (0, HostId(0), 2), (0, HostId(1), 0)]);
    assert_eq!(launches(&mut policy), [(0, Some(HostId(1))), (1, Some(HostId(0)))]);
}

#[test]
fn with_preloading_every_host_loads_every_stage_it_lacks_once_stages_it_has_run_first_in_placement() {
    let config = PoolConfig {
        placement: PlacementRule::CacheAware,
        host_cache: true,
        preload: true,
        ..PoolConfig::default()
    };
    let asks = vec![StageTarget { replicas: 1, threads: 1, key: false }; 2];
    let mut policy =
        PipelinePolicy::new("test", config, two_stages(), &HostSlots::new(3, 2), 1_000_000_000, Asks(asks));
    up(&mut policy, &[(0, HostId(0), 0), (1, HostId(1), 1)]);
    let preloads = |policy: &mut PipelinePolicy<Asks>| {
        let mut actions = Vec::new();
        policy.on_event(Time::ZERO, Event::Tick, &mut actions);
        actions
            .into_iter()
            .filter_map(|a| match a {
                Action::Preload { unit, host } => Some((unit.stage_index(), host)),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    // In rounds, each host the stage it lacks that the fewest hosts hold: host 2, holding none,
    // first takes stage 0 (a tie), then stage 1.
    assert_eq!(preloads(&mut policy), [(1, HostId(0)), (0, HostId(1)), (0, HostId(2)), (1, HostId(2))]);
    assert_eq!(preloads(&mut policy), [], "asked once");
}
