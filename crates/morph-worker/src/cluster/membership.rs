//! The server's view of the cluster: the hosts and workers registered in etcd, kept current by
//! a watch on the cluster's prefix. Hosts joining and leaving, and workers whose key went away
//! (its lease expired, or it was revoked at a clean exit), are handed to `on_change`; after a
//! broken watch, the registry is read again and what changed meanwhile is handed over too.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::etcd::{Change, Etcd};
use super::{ClusterConfig, ClusterError, HostRecord, WorkerRecord};
use crate::locking::lock;

/// A change to the cluster's membership.
#[derive(Debug, Clone, PartialEq)]
pub enum MemberChange {
    /// A host registered (first seen, or back after it had left).
    HostUp(HostRecord),
    /// A host's registration is gone: its agent is dead, frozen or cut off.
    HostGone(String),
    /// The registration of worker `pid` on `host` is gone.
    WorkerGone { host: String, pid: u32 },
}

/// Called with every change, on the membership's thread.
pub type OnChange = Box<dyn Fn(MemberChange) + Send + Sync>;

#[derive(Debug)]
pub struct Membership {
    config: ClusterConfig,
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    hosts: BTreeMap<String, HostRecord>,
    workers: BTreeMap<(String, u32), WorkerRecord>,
}

/// A key of the cluster, parsed.
#[derive(Debug, PartialEq, Eq)]
enum Key {
    Host(String),
    Worker(String, u32),
}

impl Membership {
    /// Reads the registry and keeps watching it on a thread of its own (which lives as long as
    /// the process: a watch has nothing to wake it but etcd).
    pub fn start(config: ClusterConfig, on_change: OnChange) -> Result<Self, ClusterError> {
        let etcd = config.etcd();
        let state = Arc::new(Mutex::new(State::default()));
        let revision = resync(&etcd, &config.prefix(), &state, &on_change)?;
        let watched = (config.prefix(), state.clone());
        std::thread::Builder::new()
            .name("morph-membership".into())
            .spawn(move || watch(&etcd, &watched.0, &watched.1, revision, &on_change))
            .map_err(|e| ClusterError::Etcd(format!("membership thread: {e}")))?;
        Ok(Self { config, state })
    }

    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    /// The hosts registered now, by name.
    pub fn hosts(&self) -> Vec<HostRecord> {
        lock(&self.state).hosts.values().cloned().collect()
    }

    pub fn host(&self, name: &str) -> Option<HostRecord> {
        lock(&self.state).hosts.get(name).cloned()
    }

    /// The workers registered now.
    pub fn workers(&self) -> Vec<WorkerRecord> {
        lock(&self.state).workers.values().cloned().collect()
    }
}

/// Reads every key again, replacing the state; workers that vanished are reported gone.
/// Returns the revision to watch from.
fn resync(
    etcd: &Etcd,
    prefix: &str,
    state: &Mutex<State>,
    on_change: &OnChange,
) -> Result<i64, ClusterError> {
    let (pairs, revision) = etcd.get_prefix(prefix)?;
    let mut fresh = State::default();
    for (key, value) in pairs {
        apply(&mut fresh, prefix, Change::Put { key, value });
    }
    let changes: Vec<MemberChange> = {
        let mut state = lock(state);
        let up = fresh.hosts.values().filter(|h| !state.hosts.contains_key(&h.name)).cloned();
        let hosts_gone = state.hosts.keys().filter(|k| !fresh.hosts.contains_key(*k)).cloned();
        let workers_gone = state.workers.keys().filter(|k| !fresh.workers.contains_key(*k)).cloned();
        let changes = up
            .map(MemberChange::HostUp)
            .chain(hosts_gone.map(MemberChange::HostGone))
            .chain(workers_gone.map(|(host, pid)| MemberChange::WorkerGone { host, pid }))
            .collect();
        *state = fresh;
        changes
    };
    for change in changes {
        on_change(change);
    }
    Ok(revision + 1)
}

fn watch(etcd: &Etcd, prefix: &str, state: &Mutex<State>, mut revision: i64, on_change: &OnChange) {
    loop {
        let watched = etcd.watch_prefix(prefix, revision, |change| {
            let change = apply(&mut lock(state), prefix, change);
            if let Some(change) = change {
                on_change(change);
            }
            true
        });
        if let Err(e) = watched {
            tracing::warn!(error = %e, "etcd watch broke; reading the registry again");
        }
        std::thread::sleep(Duration::from_millis(200));
        match resync(etcd, prefix, state, on_change) {
            Ok(next) => revision = next,
            Err(e) => tracing::warn!(error = %e, "reading the registry failed"),
        }
    }
}

/// Applies one change; returns what it changed in the membership, if anything.
fn apply(state: &mut State, prefix: &str, change: Change) -> Option<MemberChange> {
    match change {
        Change::Put { key, value } => match parse_key(prefix, &key)? {
            Key::Host(name) => {
                let record = serde_json::from_slice::<HostRecord>(&value)
                    .inspect_err(|e| tracing::warn!(%key, error = %e, "unreadable host record"))
                    .ok()?;
                let new = state.hosts.insert(name, record.clone()).is_none();
                new.then_some(MemberChange::HostUp(record))
            }
            Key::Worker(host, pid) => {
                let record = serde_json::from_slice::<WorkerRecord>(&value)
                    .inspect_err(|e| tracing::warn!(%key, error = %e, "unreadable worker record"))
                    .ok()?;
                state.workers.insert((host, pid), record);
                None
            }
        },
        Change::Delete { key } => match parse_key(prefix, &key)? {
            Key::Host(name) => state.hosts.remove(&name).map(|_| MemberChange::HostGone(name)),
            Key::Worker(host, pid) => {
                state.workers.remove(&(host.clone(), pid)).map(|_| MemberChange::WorkerGone { host, pid })
            }
        },
    }
}

fn parse_key(prefix: &str, key: &str) -> Option<Key> {
    let rest = key.strip_prefix(prefix)?;
    if let Some(name) = rest.strip_prefix("hosts/") {
        return Some(Key::Host(name.to_string()));
    }
    let (host, pid) = rest.strip_prefix("workers/")?.rsplit_once('/')?;
    Some(Key::Worker(host.to_string(), pid.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_into_hosts_and_workers() {
        let p = "/morph/c/";
        assert_eq!(parse_key(p, "/morph/c/hosts/a"), Some(Key::Host("a".into())));
        assert_eq!(parse_key(p, "/morph/c/workers/a/42"), Some(Key::Worker("a".into(), 42)));
        assert_eq!(parse_key(p, "/morph/c/workers/a/x"), None);
        assert_eq!(parse_key(p, "/morph/d/hosts/a"), None);
        assert_eq!(parse_key(p, "/morph/c/other"), None);
    }
}
