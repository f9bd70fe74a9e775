//! Instances: one unit loaded on one device slot.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::host::HostId;
use crate::unit::UnitSpec;

/// Assigned by the ledger when an instance comes up, in order, never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct InstanceId(pub u32);

impl fmt::Display for InstanceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceInfo {
    pub id: InstanceId,
    pub unit: UnitSpec,
    /// The host it runs on.
    pub host: HostId,
}
