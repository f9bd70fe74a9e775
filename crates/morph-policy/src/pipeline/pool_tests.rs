//! The shared executor's launches when the cluster's slots are scarce.

use morph_core::{
    Action, Event, HostId, HostSlots, InstanceId, InstanceInfo, Policy, RuntimeSpec, StageTime, StageTimes,
    Time,
};

use super::{PipelinePolicy, PoolConfig, PoolView, Sizer, StageTarget};

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
    let times = StageTimes {
        runtime: RuntimeSpec::dynamic(128, 1),
        layers: 2,
        stages: vec![StageTime { a_ms: 10.0, b_ms: 0.0 }; 2],
        hop_ms: 0.0,
    };
    let hosts = HostSlots::new(1, slots);
    let mut policy =
        PipelinePolicy::new("test", PoolConfig::default(), times, &hosts, 1_000_000_000, Asks(targets));
    let mut actions = Vec::new();
    for (k, unit) in policy.layout(usize::from(slots)).expect("a layout").into_iter().enumerate() {
        let instance = InstanceInfo { id: InstanceId(k as u32), unit, host: HostId(0) };
        policy.on_event(Time::ZERO, Event::InstanceUp { instance, launch: None }, &mut actions);
    }
    policy
}

/// The stages launched for at the next control period, in order.
fn launched(policy: &mut PipelinePolicy<Asks>) -> Vec<u16> {
    let mut actions = Vec::new();
    policy.on_event(Time::ZERO, Event::Tick, &mut actions);
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Launch { unit, .. } => Some(unit.stage_index()),
            _ => None,
        })
        .collect()
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
