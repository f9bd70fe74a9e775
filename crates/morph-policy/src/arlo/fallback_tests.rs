//! Late binding across classes: with dynamic fallbacks, a long request that finds no idle
//! instance of a runtime that fits it runs on an idle shorter one, and an instance with nothing
//! its shape fits waiting takes the longer request that has waited longest; its own class still
//! comes first.

use std::sync::Arc;

use morph_core::fixtures::request;
use morph_core::{
    Action, Event, HostId, InstanceId, InstanceInfo, LatencyProfile, Point, Policy, RequestId, Time,
};

use super::config::RuntimeSet;
use super::{ArloConfig, ArloPolicy, ServiceModel};

/// Instance 0 runs fixed:64 (with a fallback to 512 when `fallback`), instance 1 fixed:512;
/// `pooled`: the backlog is taken oldest first whatever the class.
fn fleet(fallback: bool, pooled: bool) -> ArloPolicy {
    let points = [Point { batch: 1, len: 64, ms: 1.0 }, Point { batch: 1, len: 512, ms: 4.0 }];
    let model = ServiceModel::new(Arc::new(LatencyProfile::from_points("m", points).unwrap()), 100_000_000);
    let config = ArloConfig {
        runtime_set: RuntimeSet::Explicit,
        max_lens: vec![64, 512],
        allocate: false,
        dynamic_longest: false,
        dynamic_fallback: fallback,
        pooled_backlog: pooled,
        ..ArloConfig::preset("arlo").unwrap()
    };
    let mut policy = ArloPolicy::new("arlo", config, model);
    let mut actions = Vec::new();
    for (id, unit) in policy.layout(2).unwrap().into_iter().enumerate() {
        let instance = InstanceInfo { id: InstanceId(id as u32), unit, host: HostId(0) };
        policy.on_event(Time::ZERO, Event::InstanceUp { instance, launch: None }, &mut actions);
    }
    assert_eq!(
        policy.layout(2).unwrap()[0].runtime.to_string(),
        if fallback { "fixed:64x1+512" } else { "fixed:64x1" }
    );
    policy
}

/// (instance, request) of each batch started by `event`.
fn runs(policy: &mut ArloPolicy, at: u64, event: Event) -> Vec<(u32, u64)> {
    let mut actions = Vec::new();
    policy.on_event(Time(at), event, &mut actions);
    actions
        .into_iter()
        .filter_map(|a| match a {
            Action::Run { instance, requests, .. } => Some((instance.0, requests[0].0)),
            _ => None,
        })
        .collect()
}

fn arrive(policy: &mut ArloPolicy, id: u64, len: u32) -> Vec<(u32, u64)> {
    runs(policy, id, Event::Arrival(request(id, len, Time(id))))
}

fn done(policy: &mut ArloPolicy, instance: u32) -> Vec<(u32, u64)> {
    let requests: Vec<RequestId> = Vec::new();
    runs(
        policy,
        100,
        Event::BatchDone { instance: InstanceId(instance), requests, failed: false, computed: None },
    )
}

#[test]
fn a_long_request_runs_on_an_idle_short_instance_and_its_own_class_comes_first() {
    let mut p = fleet(true, false);
    assert_eq!(arrive(&mut p, 1, 400), vec![(1, 1)], "the runtime that fits it first");
    assert_eq!(arrive(&mut p, 2, 300), vec![(0, 2)], "then the short instance's fallback");
    assert_eq!(arrive(&mut p, 3, 500), vec![]);
    assert_eq!(arrive(&mut p, 4, 30), vec![]);
    assert_eq!(done(&mut p, 0), vec![(0, 4)], "its own class before the older long request");
    assert_eq!(done(&mut p, 0), vec![(0, 3)], "then the long one, with nothing of its own");
    assert_eq!(p.describe()["counters"]["spilled"], 2);
}

#[test]
fn without_a_fallback_a_long_request_waits_for_a_runtime_that_fits() {
    let mut p = fleet(false, false);
    assert_eq!(arrive(&mut p, 1, 400), vec![(1, 1)]);
    assert_eq!(arrive(&mut p, 2, 300), vec![]);
    assert_eq!(done(&mut p, 0), vec![], "the short instance cannot take it");
    assert_eq!(done(&mut p, 1), vec![(1, 2)]);
    assert_eq!(p.describe()["counters"]["spilled"], 0);
}

#[test]
fn pooled_the_long_instance_takes_the_oldest_it_fits_whatever_its_class() {
    let mut p = fleet(true, true);
    assert_eq!(arrive(&mut p, 1, 400), vec![(1, 1)]);
    assert_eq!(arrive(&mut p, 2, 300), vec![(0, 2)]);
    assert_eq!(arrive(&mut p, 3, 30), vec![]);
    assert_eq!(arrive(&mut p, 4, 500), vec![]);
    assert_eq!(done(&mut p, 1), vec![(1, 3)], "the older short request before its own class");
    assert_eq!(done(&mut p, 1), vec![(1, 4)]);
}

/// The runtime set of a pooled Arlo with bounds 64, 128 and 512 (the longest dynamic), on a
/// profile of one-row points `(len, ms)`.
fn pooled_set(points: &[(u32, f64)]) -> Vec<String> {
    let points = points.iter().map(|&(len, ms)| Point { batch: 1, len, ms });
    let model = ServiceModel::new(Arc::new(LatencyProfile::from_points("m", points).unwrap()), 100_000_000);
    let config = ArloConfig {
        runtime_set: RuntimeSet::Explicit,
        max_lens: vec![64, 128, 512],
        allocate: false,
        ..ArloConfig::preset("arlo").unwrap()
    };
    let described = ArloPolicy::new("arlo", config, model).describe();
    let set = described["runtimes"].as_array().unwrap().iter();
    set.map(|r| r["runtime"].as_str().unwrap().to_string()).collect()
}

#[test]
fn a_fallback_runs_a_shorter_class_only_where_the_profile_prices_it_below_the_padding() {
    // Every input of the 64 class costs less at its own length than padded to 128.
    let cheaper = pooled_set(&[(1, 0.8), (64, 1.0), (128, 1.5), (512, 4.0)]);
    assert_eq!(cheaper, vec!["fixed:64x1+512", "fixed:128x1+512/64", "dynamic:512x1"]);
    // The shortest inputs cost as much as the shape (a flat start, as on a GPU): none moves.
    let flat = pooled_set(&[(1, 1.5), (64, 1.0), (128, 1.5), (512, 4.0)]);
    assert_eq!(flat, vec!["fixed:64x1+512", "fixed:128x1+512", "dynamic:512x1"]);
}
