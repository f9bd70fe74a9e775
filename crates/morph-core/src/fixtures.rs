//! What tests across the workspace share (the `fixtures` feature; never in a build that serves):
//! requests, flat latency profiles, a policy that does what it is told, and token ids.

use std::sync::{Arc, Mutex};

use crate::latency_profile::{LatencyProfile, Point};
use crate::policy::{Action, Event, Policy};
use crate::request::{RequestId, RequestInfo};
use crate::time::Time;

/// An encoder request of `input_len` tokens arriving at `arrival`, with no generation and no
/// service class (set those with struct update syntax).
pub fn request(id: u64, input_len: u32, arrival: Time) -> RequestInfo {
    RequestInfo { id: RequestId(id), input_len, arrival, generation: None, service: None }
}

/// A profile in which every batch of up to `rows` rows and 512 tokens takes `ms` (a larger
/// batch takes proportionally longer).
pub fn flat_profile(ms: f64, rows: u32) -> LatencyProfile {
    let mut points = vec![Point { batch: 1, len: 1, ms }, Point { batch: 1, len: 512, ms }];
    if rows > 1 {
        points.extend([Point { batch: rows, len: 1, ms }, Point { batch: rows, len: 512, ms }]);
    }
    LatencyProfile::from_points("flat", points).unwrap_or_else(|e| panic!("a flat profile: {e}"))
}

/// A profile over the grid `morph serve` measures (batches 1–16, lengths 8–512) in which a batch
/// takes `fixed` ms plus `per_token` ms per padded token.
pub fn linear_profile(fixed: f64, per_token: f64) -> LatencyProfile {
    let grid =
        [1, 2, 4, 8, 16].into_iter().flat_map(|batch| [8, 16, 32, 64, 128, 256, 512].map(|len| (batch, len)));
    let points =
        grid.map(|(batch, len)| Point { batch, len, ms: fixed + per_token * f64::from(batch * len) });
    LatencyProfile::from_points("linear", points).unwrap_or_else(|e| panic!("a linear profile: {e}"))
}

/// A policy that answers the next event with the actions it is given, and logs every event.
#[derive(Debug, Default, Clone)]
pub struct Puppet {
    /// What it does on the next event.
    pub next: Arc<Mutex<Vec<Action>>>,
    /// Every event it was told, in order.
    pub seen: Arc<Mutex<Vec<Event>>>,
}

impl Policy for Puppet {
    fn name(&self) -> &str {
        "puppet"
    }

    fn on_event(&mut self, _now: Time, event: Event, actions: &mut Vec<Action>) {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).push(event);
        actions.append(&mut self.next.lock().unwrap_or_else(|e| e.into_inner()));
    }

    fn queue_len(&self) -> usize {
        0
    }

    fn describe(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}

/// Token ids drawn from a fixed-seed generator: [CLS], `len − 2` ids from the vocabulary, [SEP].
pub fn random_ids(len: usize, seed: u64) -> Vec<u32> {
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut ids = vec![101];
    for _ in 0..len - 2 {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ids.push(1000 + ((state >> 33) % 29_000) as u32);
    }
    ids.push(102);
    ids
}
