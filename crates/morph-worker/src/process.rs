//! Replicas as `morph worker` processes: the launcher starts one per launch (on this host, or
//! through the agent of a host found in etcd), waits for it to connect back (over a Unix
//! socket, or TCP from another host) and report its engine built, and hands the server a
//! [`RemoteEngine`]. Three start kinds: hot (a parked replica of the unit put back in service),
//! warm (its prepared artefact is in its host's cache: no weights read, no graph written or
//! optimised) and cold (from the weights on disk; the optimised graphs it writes are taken into
//! the cache for the next start).

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::remote::{Endpoint, Listener, RemoteEngine};
use crate::wire::Boot;
use morph_core::{HostId, StartKind, TokenPlan, UnitSpec};
use morph_engine::{EngineError, EngineThread};

use crate::cluster::hosts::{RemoteConfig, RemoteHosts};
use crate::cluster::replica_unstarted;
use crate::host::cache::CachedArtefact;
use crate::host::{Spawner, WorkerModel};
use crate::locking::lock;

/// How the server runs `morph worker` processes.
#[derive(Debug, Clone)]
pub struct ProcessConfig {
    /// The `morph` binary.
    pub exe: PathBuf,
    /// Host memory for prepared artefacts (a tmpfs), and its budget in bytes; `None`: no
    /// cache, every start is cold.
    pub cache: Option<(PathBuf, u64)>,
    /// Replicas kept loaded after the policy retires them, for hot starts.
    pub parked: usize,
    /// A worker that has not reported its engine built within this is killed.
    pub start_timeout: Duration,
    /// A worker that has not answered a batch within this is declared dead and killed.
    pub batch_timeout: Duration,
    /// Replicas run on the hosts of a cluster found through etcd (`None`: on this host).
    pub remote: Option<RemoteConfig>,
}

/// How one replica started: its kind, the time in ms from the launch to its engine answering
/// its first batch, and the steps (as the worker measured them; `spawn_ms` is the rest: the
/// process started, loaded and connected).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StartReport {
    pub kind: StartKind,
    pub total_ms: f64,
    pub spawn_ms: f64,
    pub library_ms: f64,
    pub read_ms: f64,
    pub build_ms: f64,
    pub session_ms: f64,
    pub first_batch_ms: f64,
    pub pid: u32,
}

impl StartReport {
    fn new(kind: StartKind, total: Duration, boot: &Boot) -> Self {
        let t = boot.times;
        let inside = t.library + t.read + t.build + t.session + boot.first_batch;
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        Self {
            kind,
            total_ms: ms(total),
            spawn_ms: ms(total.saturating_sub(inside)),
            library_ms: ms(t.library),
            read_ms: ms(t.read),
            build_ms: ms(t.build),
            session_ms: ms(t.session),
            first_batch_ms: ms(boot.first_batch),
            pid: boot.pid,
        }
    }

    /// A parked replica put back in service after `total`.
    fn hot(total: Duration, pid: u32) -> Self {
        let zero = Duration::ZERO;
        let times = morph_engine::StartTimes::default();
        let boot = Boot { pid, dim: 0, prepared: true, times, first_batch: zero, packs: false };
        Self::new(StartKind::Hot, total, &boot)
    }

    pub fn total(&self) -> Duration {
        Duration::from_secs_f64(self.total_ms / 1e3)
    }
}

#[derive(Debug)]
pub struct ProcessLauncher {
    config: ProcessConfig,
    spawner: Spawner,
    /// Where the Unix sockets local workers connect to live (removed with the launcher).
    sockets: tempfile::TempDir,
    parked: Mutex<Vec<Parked>>,
    sockets_made: AtomicU32,
    /// Hosts found through etcd; `None`: every replica runs on this host.
    remote: Option<RemoteHosts>,
}

#[derive(Debug)]
struct Parked {
    unit: UnitSpec,
    host: HostId,
    worker: EngineThread,
    pid: u32,
}

impl ProcessLauncher {
    pub fn new(config: ProcessConfig, model: WorkerModel) -> Result<Self, EngineError> {
        let io = |e: std::io::Error| EngineError::Load(format!("worker launcher: {e}"));
        let sockets = tempfile::Builder::new().prefix("morph-workers").tempdir().map_err(io)?;
        let remote = match &config.remote {
            Some(remote) => {
                Some(RemoteHosts::join(remote, &model.name).map_err(|e| replica_unstarted(e.to_string()))?)
            }
            None => None,
        };
        let spawner = Spawner::new(config.exe.clone(), model, config.cache.as_ref()).map_err(io)?;
        let parked = Mutex::new(Vec::new());
        Ok(Self { config, spawner, sockets, parked, sockets_made: AtomicU32::new(0), remote })
    }

    /// Starts a replica of `unit` on `server` (`None`: the least loaded; without a cluster,
    /// this host, host 0, the only one the server's `Launcher::start` lets through): hot if one is parked there, else warm if its artefact is in that
    /// host's cache, else cold. Returns its engine on its own thread, how the start went and
    /// the server it runs on.
    pub fn start(
        &self,
        unit: UnitSpec,
        host: Option<HostId>,
        name: String,
    ) -> Result<(EngineThread, StartReport, HostId), EngineError> {
        let started = Instant::now();
        let host = match (&self.remote, host) {
            (None, _) => HostId(0),
            (Some(remote), None) => remote.least_loaded(),
            (Some(_), Some(s)) => s,
        };
        if let Some((worker, pid)) = self.unpark(unit, host) {
            return Ok((worker, StartReport::hot(started.elapsed(), pid), host));
        }
        let deadline = started + self.config.start_timeout;
        let (engine, kind) = match &self.remote {
            Some(remote) => remote.start(unit, host, self.plans(), deadline, self.config.batch_timeout)?,
            None => self.start_here(unit, deadline)?,
        };
        let report = StartReport::new(kind, started.elapsed(), engine.boot());
        let pid = engine.pid();
        let worker = EngineThread::spawn(name, Box::new(engine))
            .map_err(|e| EngineError::Load(format!("worker {pid} thread: {e}")))?;
        Ok((worker, report, host))
    }

    /// A worker process on this host, reached over a Unix socket.
    fn start_here(
        &self,
        unit: UnitSpec,
        deadline: Instant,
    ) -> Result<(RemoteEngine, StartKind), EngineError> {
        let n = self.sockets_made();
        let socket = self.sockets.path().join(format!("w{n}.sock"));
        let listener = Listener::bind(&Endpoint::Unix(socket))
            .map_err(|e| EngineError::Load(format!("worker socket: {e}")))?;
        let endpoint = listener.endpoint().map_err(|e| EngineError::Load(e.to_string()))?;
        let spawned = self.spawner.spawn(unit, &endpoint, &[], &[])?;
        let accepted = RemoteEngine::accept(
            &listener,
            Some(Box::new(spawned.child)),
            unit.runtime,
            deadline,
            self.config.batch_timeout,
            // A worker of this host connects over a Unix socket in the server's private folder.
            None,
        );
        match (accepted, spawned.staging) {
            (Ok(engine), Some(staging)) => {
                self.spawner.admit(staging);
                Ok((engine, spawned.kind))
            }
            (Ok(engine), None) => Ok((engine, spawned.kind)),
            (Err(e), Some(staging)) => {
                self.spawner.discard(staging);
                Err(e)
            }
            (Err(e), None) => Err(e),
        }
    }

    fn sockets_made(&self) -> u32 {
        self.sockets_made.fetch_add(1, Ordering::Relaxed)
    }

    fn plans(&self) -> &[TokenPlan] {
        &self.spawner.model().plans
    }

    /// The hosts of the cluster, if replicas run on hosts found through etcd.
    pub fn remote(&self) -> Option<&RemoteHosts> {
        self.remote.as_ref()
    }

    /// Keeps a retired replica loaded for a later hot start, if there is room; gives it back
    /// (to be stopped) if not.
    pub fn park(&self, unit: UnitSpec, host: HostId, worker: EngineThread, pid: u32) -> Option<EngineThread> {
        let mut parked = lock(&self.parked);
        if parked.len() >= self.config.parked {
            return Some(worker);
        }
        parked.push(Parked { unit, host, worker, pid });
        None
    }

    fn unpark(&self, unit: UnitSpec, host: HostId) -> Option<(EngineThread, u32)> {
        let mut parked = lock(&self.parked);
        let at = parked.iter().position(|p| p.unit == unit && p.host == host)?;
        let p = parked.swap_remove(at);
        Some((p.worker, p.pid))
    }

    /// This host's cache: its artefacts, bytes held, budget and evictions so far.
    pub fn cache_state(&self) -> Option<(Vec<CachedArtefact>, u64, u64, u64)> {
        self.spawner.cache_state()
    }

    /// Stops the parked replicas and empties this host's cache.
    pub fn shutdown(&self) {
        let parked: Vec<_> = lock(&self.parked).drain(..).collect();
        drop(parked);
        self.spawner.clear_cache();
    }

    /// Units of the replicas parked now.
    pub fn parked(&self) -> Vec<UnitSpec> {
        lock(&self.parked).iter().map(|p| p.unit).collect()
    }
}
