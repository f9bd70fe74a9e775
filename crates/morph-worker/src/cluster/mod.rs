//! Morph past one machine. Hosts and workers find each other through etcd:
//!
//! - a **host agent** (`morph agent`, one per host) registers its host under a lease
//!   it keeps alive, `/morph/{cluster}/hosts/{host}`: its agent's address, its device slots, the
//!   model it serves and its host cache's contents; the server asks it to start replicas there
//!   ([`agent`]);
//! - every **worker** it starts registers itself, also under its own lease,
//!   `/morph/{cluster}/workers/{host}/{pid}`: its unit (model, stage, runtime, threads) and its
//!   host's address;
//! - the **server** watches the prefix ([`membership`]): hosts are QUART's "servers" (slots and
//!   a cache each), and a worker whose key goes away (its lease expired: the process or its host
//!   is dead, frozen or cut off) has its connection cut, so its batch fails over like a crash.
//!
//! With no etcd, workers are local processes (or threads) and none of this runs.

pub mod agent;
pub mod etcd;
pub mod hosts;
pub mod lease;
pub mod membership;

use std::net::IpAddr;
use std::time::Duration;

use morph_core::UnitSpec;
use morph_engine::EngineError;
use serde::{Deserialize, Serialize};

use crate::host::cache::CachedArtefact;

/// A replica that could not start because the cluster could not be reached or a host could not
/// take it (etcd, an agent): an engine that did not load, said as the cluster's.
pub(crate) fn replica_unstarted(detail: impl std::fmt::Display) -> EngineError {
    EngineError::Load(format!("cluster: {detail}"))
}

/// How a process reaches the cluster's registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// etcd's client URL, such as `http://10.0.0.1:2379`.
    pub etcd: String,
    /// Deployments sharing one etcd are told apart by this name.
    pub cluster: String,
    /// Keys vanish this long after their owner stopped renewing them.
    pub lease_ttl: Duration,
    /// The secret every host of the cluster shares: the agents' API and the workers'
    /// connections refuse whoever does not present it (`None`: open, for a trusted network).
    pub token: Option<ClusterToken>,
}

/// The cluster's shared secret (never printed).
#[derive(Clone, PartialEq, Eq)]
pub struct ClusterToken(String);

impl ClusterToken {
    /// A token from its text (surrounding whitespace, such as a file's last newline, dropped);
    /// `None` when empty.
    pub fn new(text: &str) -> Option<Self> {
        let text = text.trim();
        (!text.is_empty()).then(|| Self(text.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ClusterToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterToken(..)")
    }
}

impl ClusterConfig {
    /// The token as the wire and the agents' API compare it.
    pub fn token(&self) -> Option<&str> {
        self.token.as_ref().map(ClusterToken::as_str)
    }
}

impl ClusterConfig {
    /// The prefix every key of this cluster lives under.
    pub fn prefix(&self) -> String {
        format!("/morph/{}/", self.cluster)
    }

    pub fn host_key(&self, host: &str) -> String {
        format!("{}hosts/{host}", self.prefix())
    }

    pub fn worker_key(&self, host: &str, pid: u32) -> String {
        format!("{}workers/{host}/{pid}", self.prefix())
    }

    /// A client of this cluster's etcd whose calls give up after a few seconds.
    pub fn etcd(&self) -> etcd::Etcd {
        etcd::Etcd::new(&self.etcd, Duration::from_secs(3))
    }
}

/// What a host agent registers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostRecord {
    pub name: String,
    /// The agent's HTTP address (`http://IP:PORT`).
    pub agent: String,
    /// The host's address, as other hosts reach it.
    pub address: IpAddr,
    /// Replicas it may run at once (QUART's device slots).
    pub slots: u16,
    /// The model its workers load (its directory or GGUF file name).
    pub model: String,
    /// Its host cache: prepared artefacts held in memory, for warm starts.
    pub cache: Vec<CachedArtefact>,
}

/// What a worker process registers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerRecord {
    pub host: String,
    pub pid: u32,
    pub model: String,
    /// Its unit: runtime shape, pipeline stage, threads.
    pub unit: UnitSpec,
    /// Its host's address.
    pub address: IpAddr,
    /// The server endpoint it is connected to.
    pub server: String,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum ClusterError {
    #[error("{0}")]
    Etcd(String),
    #[error("{0}")]
    Agent(String),
}
