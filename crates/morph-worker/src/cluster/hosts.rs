//! The server's side of remote hosts: replicas started by the host agents registered in etcd,
//! connecting back over TCP. Hosts serving the server's model are QUART's servers, numbered in
//! the order they were first seen (`ServerId(i)` is the i-th); one that leaves keeps its number
//! with 0 slots until it comes back. Slot changes are queued for the policy
//! ([`RemoteHosts::slot_changes`]). A worker whose registration goes away has its connection
//! cut, so its batch is retried elsewhere at once.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::remote::{Endpoint, Listener, RemoteEngine, Severer, WorkerProcess};
use morph_core::{HostId, HostSlots, StartKind, TokenPlan, UnitSpec};
use morph_engine::EngineError;

use super::agent::{StartRequest, Started};
use super::membership::{MemberChange, Membership};
use super::{ClusterConfig, ClusterError, HostRecord, replica_unstarted};
use crate::locking::lock;

/// One host as the server sees it now.
#[derive(Debug, Clone)]
pub struct HostState {
    pub id: HostId,
    pub name: String,
    /// Its slots for the policy (0: gone or suspect).
    pub slots: u16,
    /// Its registration, if its agent's lease is alive.
    pub record: Option<HostRecord>,
    /// Worker processes registered on it.
    pub workers: usize,
}

/// How the server joins a cluster.
#[derive(Debug, Clone)]
pub struct RemoteConfig {
    pub cluster: ClusterConfig,
    /// This server's address, as workers on other hosts reach it.
    pub advertise: IpAddr,
    /// Hosts to wait for at start-up, and for how long.
    pub hosts: usize,
    pub wait: Duration,
}

#[derive(Debug)]
pub struct RemoteHosts {
    membership: Arc<Membership>,
    shared: Arc<Shared>,
    advertise: IpAddr,
    http: ureq::Agent,
}

/// What the membership's thread updates.
#[derive(Debug)]
struct Shared {
    model: String,
    /// Hosts by number: name and slots now (0 while gone).
    table: Mutex<Vec<(String, u16)>>,
    severers: Mutex<HashMap<(String, u32), Severer>>,
    /// (host, slots now) for the policy, oldest first.
    changes: Mutex<Vec<(HostId, u16)>>,
    /// Workers whose registration is gone, (host, pid), for the driver.
    gone: Mutex<Vec<(HostId, u32)>>,
}

impl Shared {
    fn on_change(&self, change: MemberChange) {
        match change {
            MemberChange::HostUp(host) if host.model != self.model => {
                tracing::warn!(host = %host.name, model = %host.model, "host serves another model; not used");
            }
            MemberChange::HostUp(host) => {
                tracing::info!(host = %host.name, agent = %host.agent, slots = host.slots, "host joined");
                self.set_slots(&host.name, host.slots);
            }
            MemberChange::HostGone(name) => {
                tracing::warn!(host = %name, "host left the cluster (its agent's lease ended)");
                self.set_slots(&name, 0);
            }
            MemberChange::WorkerGone { host, pid } => {
                if let Some(severer) = lock(&self.severers).remove(&(host.clone(), pid)) {
                    tracing::warn!(%host, pid, "worker's registration is gone: cutting its connection");
                    severer.sever();
                    let index = lock(&self.table).iter().position(|(name, _)| *name == host);
                    if let Some(index) = index {
                        lock(&self.gone).push((HostId(index as u16), pid));
                    }
                }
            }
        }
    }

    fn set_slots(&self, name: &str, slots: u16) {
        let mut table = lock(&self.table);
        let index = match table.iter().position(|(n, _)| n == name) {
            Some(at) => {
                table[at].1 = slots;
                at
            }
            None if slots > 0 => {
                table.push((name.to_string(), slots));
                table.len() - 1
            }
            None => return,
        };
        lock(&self.changes).push((HostId(index as u16), slots));
    }
}

impl RemoteHosts {
    /// Watches the registry and waits for `config.hosts` hosts serving `model`.
    pub fn join(config: &RemoteConfig, model: &str) -> Result<Self, ClusterError> {
        let shared = Arc::new(Shared {
            model: model.to_string(),
            table: Mutex::default(),
            severers: Mutex::default(),
            changes: Mutex::default(),
            gone: Mutex::default(),
        });
        let on_change = {
            let shared = shared.clone();
            Box::new(move |change| shared.on_change(change))
        };
        let membership = Arc::new(Membership::start(config.cluster.clone(), on_change)?);
        let deadline = Instant::now() + config.wait;
        let ours = || lock(&shared.table).iter().filter(|(_, slots)| *slots > 0).count();
        while ours() < config.hosts && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if ours() < config.hosts {
            let hosts = membership.hosts();
            let seen: Vec<String> = hosts.iter().map(|h| format!("{} ({})", h.name, h.model)).collect();
            return Err(ClusterError::Agent(format!(
                "{} host(s) serving {model} registered under {} at {} within {:?}, {} needed (seen: {seen:?}); start `morph agent --etcd {}` on each host",
                ours(),
                config.cluster.prefix(),
                config.cluster.etcd,
                config.wait,
                config.hosts,
                config.cluster.etcd,
            )));
        }
        let http = ureq::AgentBuilder::new().timeout(Duration::from_secs(10)).build();
        Ok(Self { membership, shared, advertise: config.advertise, http })
    }

    /// The hosts as QUART's servers: slots each (0 for a host that left).
    pub fn host_slots(&self) -> HostSlots {
        HostSlots {
            slots: lock(&self.shared.table).iter().map(|(_, slots)| *slots).collect(),
            cores: Vec::new(),
        }
    }

    /// Every host known, by number.
    pub fn host_states(&self) -> Vec<HostState> {
        let workers = self.membership.workers();
        let table = lock(&self.shared.table).clone();
        table
            .into_iter()
            .enumerate()
            .map(|(index, (name, slots))| HostState {
                id: HostId(index as u16),
                record: self.membership.host(&name),
                workers: workers.iter().filter(|w| w.host == name).count(),
                name,
                slots,
            })
            .collect()
    }

    /// Slot changes since the last call: hosts that joined, left or came back.
    pub fn slot_changes(&self) -> Vec<(HostId, u16)> {
        std::mem::take(&mut *lock(&self.shared.changes))
    }

    /// Workers whose registration went away since the last call: (host, pid).
    pub fn gone_workers(&self) -> Vec<(HostId, u32)> {
        std::mem::take(&mut *lock(&self.shared.gone))
    }

    pub fn membership(&self) -> &Membership {
        &self.membership
    }

    /// The host of `server`.
    pub fn name(&self, host: HostId) -> Option<String> {
        lock(&self.shared.table).get(usize::from(host.0)).map(|(name, _)| name.clone())
    }

    /// Starts a replica of `unit` on `server` through its host's agent and waits (until
    /// `deadline`) for it to connect and report its engine built.
    pub fn start(
        &self,
        unit: UnitSpec,
        host: HostId,
        plans: &[TokenPlan],
        deadline: Instant,
        batch_timeout: Duration,
    ) -> Result<(RemoteEngine, StartKind), EngineError> {
        let name = self.name(host).ok_or_else(|| {
            replica_unstarted(format!(
                "no host {host}: the cluster has {} host(s)",
                self.host_slots().slots.len()
            ))
        })?;
        let host = self.membership.host(&name).ok_or_else(|| {
            replica_unstarted(format!(
                "host {name} (host {host}) has left the cluster: its agent's lease ended"
            ))
        })?;
        let listener = Listener::bind(&Endpoint::Tcp(SocketAddr::new(self.advertise, 0)))
            .map_err(|e| replica_unstarted(format!("listening for a worker on {}: {e}", self.advertise)))?;
        let connect = listener.endpoint().map_err(|e| replica_unstarted(e.to_string()))?.to_string();
        let request = StartRequest { unit, connect, plans: plans.to_vec() };
        let url = format!("{}/v1/workers", host.agent);
        let body = serde_json::to_string(&request).map_err(|e| replica_unstarted(e.to_string()))?;
        let started: Started = match self
            .http
            .post(&url)
            .set("content-type", "application/json")
            .set("authorization", &self.bearer())
            .send_string(&body)
        {
            Ok(answer) => {
                let text = answer.into_string().map_err(|e| replica_unstarted(format!("{url}: {e}")))?;
                serde_json::from_str(&text).map_err(|e| replica_unstarted(format!("{url}: {e}: {text}")))?
            }
            Err(ureq::Error::Status(code, answer)) => {
                let why = answer.into_string().unwrap_or_default();
                return Err(replica_unstarted(format!("host {name} refused the replica ({code}): {why}")));
            }
            Err(e) => {
                self.suspect(&name, host.slots);
                return Err(replica_unstarted(format!(
                    "host {name}'s agent at {url} is unreachable ({e}); no replica goes there until its registration is renewed or ends"
                )));
            }
        };
        let process = AgentProcess {
            agent: host.agent.clone(),
            pid: started.pid,
            http: self.http.clone(),
            bearer: self.bearer(),
        };
        let token = self.membership.config().token();
        let engine = RemoteEngine::accept(
            &listener,
            Some(Box::new(process)),
            unit.runtime,
            deadline,
            batch_timeout,
            token,
        )?;
        if let Some(severer) = engine.severer() {
            lock(&self.shared.severers).insert((name.clone(), started.pid), severer);
        }
        Ok((engine, started.kind))
    }

    /// The `Authorization` header for the agents' API: the cluster's token, or nothing to send.
    fn bearer(&self) -> String {
        self.membership.config().token().map_or_else(String::new, |t| format!("Bearer {t}"))
    }

    /// Whether `server`'s agent answers its health probe within 300 ms; one that does not is
    /// [suspect](Self::suspect) (a worker there was lost: the host is likely dead).
    pub fn host_alive(&self, host: HostId) -> bool {
        let Some(name) = self.name(host) else { return false };
        let Some(host) = self.membership.host(&name) else { return false };
        let probe = ureq::AgentBuilder::new().timeout(Duration::from_millis(300)).build();
        let alive = probe.get(&format!("{}/health", host.agent)).call().is_ok();
        if !alive {
            tracing::warn!(host = %name, "the host's agent does not answer: its replicas are lost");
            self.suspect(&name, host.slots);
        }
        alive
    }

    /// The agent of `name` did not answer: the host may be dead with its lease not yet ended.
    /// Its slots go to 0 at once (so the policy stops placing replicas there) and come back
    /// after one lease TTL and a half if it is still registered then (the agent was only slow).
    fn suspect(&self, name: &str, slots: u16) {
        self.shared.set_slots(name, 0);
        let (shared, membership, name) = (self.shared.clone(), self.membership.clone(), name.to_string());
        let wait = membership.config().lease_ttl.mul_f64(1.5);
        let spawned = std::thread::Builder::new().name("morph-suspect".into()).spawn(move || {
            std::thread::sleep(wait);
            if membership.host(&name).is_some() {
                tracing::info!(host = %name, "host still registered after its agent failed to answer: back in use");
                shared.set_slots(&name, slots);
            }
        });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot watch a suspect host");
        }
    }

    /// The host with slots and the fewest registered workers per slot (for a launch that
    /// names none).
    pub fn least_loaded(&self) -> HostId {
        let workers = self.membership.workers();
        let table = lock(&self.shared.table).clone();
        let load = |(name, slots): &(String, u16)| {
            let n = workers.iter().filter(|w| &w.host == name).count();
            n as f64 / f64::from(*slots)
        };
        let open = table.iter().enumerate().filter(|(_, (_, slots))| *slots > 0);
        let best = open.min_by(|a, b| load(a.1).total_cmp(&load(b.1))).map_or(0, |(at, _)| at);
        HostId(best as u16)
    }
}

/// A worker process on another host, reached through that host's agent.
#[derive(Debug)]
struct AgentProcess {
    agent: String,
    pid: u32,
    http: ureq::Agent,
    /// The `Authorization` header the agents' API takes.
    bearer: String,
}

impl AgentProcess {
    /// Asks the agent, on a thread of its own (an unreachable host must not hold up the batch
    /// that failed), to kill the worker once `grace` is over.
    fn stop_after(&self, grace: Duration) -> String {
        let url = format!("{}/v1/workers/{}?grace_ms={}", self.agent, self.pid, grace.as_millis());
        let (http, bearer) = (self.http.clone(), self.bearer.clone());
        let asked = std::thread::Builder::new().name("morph-stop".into()).spawn(move || {
            if let Err(e) =
                http.delete(&url).set("authorization", &bearer).timeout(Duration::from_secs(5)).call()
            {
                tracing::warn!(%url, error = %e, "the host's agent did not take the stop");
            }
        });
        match asked {
            Ok(_) => "its host's agent is told to stop it".into(),
            Err(e) => format!("its host's agent cannot be told ({e})"),
        }
    }
}

impl WorkerProcess for AgentProcess {
    /// A remote worker that dies before connecting is caught by the start deadline.
    fn exited(&mut self) -> Option<String> {
        None
    }

    fn kill(&mut self) -> String {
        self.stop_after(Duration::ZERO)
    }

    fn stop(&mut self, grace: Duration) {
        self.stop_after(grace);
    }
}
