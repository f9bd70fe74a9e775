//! A key kept in etcd under a lease for as long as its owner lives: renewed on a thread three
//! times per TTL, put again under a new lease if the old one expired (the owner was frozen or
//! cut off for longer than the TTL), revoked when dropped. A process that dies stops renewing,
//! and etcd deletes the key one TTL later: that deletion is how the others learn it is dead.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::ClusterError;
use super::etcd::{Etcd, Lease};
use crate::locking::lock;

#[derive(Debug)]
pub struct Registration {
    shared: Arc<Shared>,
    keeper: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct Shared {
    etcd: Etcd,
    key: String,
    value: Mutex<Vec<u8>>,
    lease: Mutex<Lease>,
    ttl: Duration,
    stop: AtomicBool,
}

impl Registration {
    /// Puts `key` = `value` under a new lease of `ttl` and keeps it alive.
    pub fn new(etcd: Etcd, key: String, value: Vec<u8>, ttl: Duration) -> Result<Self, ClusterError> {
        let lease = etcd.grant(ttl)?;
        etcd.put(&key, &value, Some(lease))?;
        let shared = Arc::new(Shared {
            etcd,
            key,
            value: Mutex::new(value),
            lease: Mutex::new(lease),
            ttl,
            stop: AtomicBool::new(false),
        });
        let keeper = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("morph-lease".into())
                .spawn(move || shared.keep())
                .map_err(|e| ClusterError::Etcd(format!("lease keeper thread: {e}")))?
        };
        Ok(Self { shared, keeper: Some(keeper) })
    }

    /// Replaces the value (under the same lease).
    pub fn update(&self, value: Vec<u8>) -> Result<(), ClusterError> {
        let lease = *lock(&self.shared.lease);
        self.shared.etcd.put(&self.shared.key, &value, Some(lease))?;
        *lock(&self.shared.value) = value;
        Ok(())
    }

    pub fn key(&self) -> &str {
        &self.shared.key
    }

    pub fn lease(&self) -> Lease {
        *lock(&self.shared.lease)
    }
}

impl Shared {
    fn keep(&self) {
        let every = self.ttl / 3;
        while !self.stop.load(Ordering::Relaxed) {
            std::thread::park_timeout(every.max(Duration::from_millis(100)));
            if self.stop.load(Ordering::Relaxed) {
                return;
            }
            let lease = *lock(&self.lease);
            match self.etcd.keep_alive(lease) {
                Ok(true) => {}
                Ok(false) => {
                    tracing::warn!(key = %self.key, "lease expired; registering again");
                    let value = lock(&self.value).clone();
                    match self
                        .etcd
                        .grant(self.ttl)
                        .and_then(|l| self.etcd.put(&self.key, &value, Some(l)).map(|()| l))
                    {
                        Ok(fresh) => *lock(&self.lease) = fresh,
                        Err(e) => tracing::warn!(key = %self.key, error = %e, "registering again failed"),
                    }
                }
                Err(e) => tracing::warn!(key = %self.key, error = %e, "lease keep-alive failed"),
            }
        }
    }
}

impl Drop for Registration {
    /// Stops renewing and revokes the lease: the key is gone at once, not one TTL later.
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(keeper) = self.keeper.take() {
            keeper.thread().unpark();
            let _ = keeper.join();
        }
        let _ = self.shared.etcd.revoke(*lock(&self.shared.lease));
    }
}
