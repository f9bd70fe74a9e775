//! Hosts: the machines a deployment runs on (QUART's servers), each with device slots.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A host of device slots (QUART's server). A single-host deployment has only host 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct HostId(pub u16);

impl fmt::Display for HostId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The hosts a deployment runs on: device slots per host, and the cores that bound the threads
/// of the instances on it (empty: unbounded).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostSlots {
    pub slots: Vec<u16>,
    #[serde(default)]
    pub cores: Vec<u16>,
}

impl HostSlots {
    pub fn new(count: u16, slots_each: u16) -> Self {
        Self { slots: vec![slots_each; usize::from(count)], cores: Vec::new() }
    }

    /// With `cores_each` cores on every host: Σ threads of the instances on a host stay within.
    pub fn with_cores(self, cores_each: u16) -> Self {
        let cores = vec![cores_each; self.slots.len()];
        Self { cores, ..self }
    }

    /// The cores of host `index`, if bounded.
    pub fn cores_of(&self, index: usize) -> Option<u16> {
        self.cores.get(index).copied()
    }

    pub fn ids(&self) -> impl Iterator<Item = HostId> + '_ {
        (0..self.slots.len() as u16).map(HostId)
    }

    pub fn total_slots(&self) -> usize {
        self.slots.iter().map(|&s| usize::from(s)).sum()
    }
}
