//! Replicas as `morph worker` processes: the launcher spawns one per launch, waits for it to
//! connect back over a Unix socket and report its engine built, and hands the server a
//! [`RemoteEngine`]. Three start kinds: hot (a parked replica of the unit put back in service),
//! warm (its prepared artefact is in the host cache: no weights read, no graph written or
//! optimised) and cold (from the weights on disk; the optimised graphs it writes are taken into
//! the cache for the next start).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use morph_core::{PlanId, StartKind, UnitSpec};
use morph_engine::remote::{Endpoint, Listener, RemoteEngine};
use morph_engine::wire::Boot;
use morph_engine::{EngineError, EngineWorker, Pooling};

use super::host_cache::{CachedArtefact, HostCache};

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
        let times = morph_engine::ort_runtime::StartTimes::default();
        let boot = Boot { pid, dim: 0, prepared: true, times, first_batch: zero };
        Self::new(StartKind::Hot, total, &boot)
    }

    pub fn total(&self) -> Duration {
        Duration::from_secs_f64(self.total_ms / 1e3)
    }
}

/// What a worker process runs, besides its unit.
#[derive(Debug)]
pub enum WorkerModel {
    /// The ONNX Runtime graphs Morph writes of the encoder in `dir`.
    Encoder { dir: PathBuf, library: PathBuf, pooling: Pooling, plans: Vec<PlanId> },
    /// Prefill stages of the decoder in a GGUF file.
    DecoderStages { gguf: PathBuf },
}

#[derive(Debug)]
pub struct ProcessLauncher {
    config: ProcessConfig,
    model: WorkerModel,
    /// Where the Unix sockets workers connect to live (removed with the launcher).
    sockets: tempfile::TempDir,
    cache: Option<Mutex<HostCache>>,
    parked: Mutex<Vec<(UnitSpec, EngineWorker, u32)>>,
    spawned: AtomicU32,
}

impl ProcessLauncher {
    pub fn new(config: ProcessConfig, model: WorkerModel) -> Result<Self, EngineError> {
        let io = |e: std::io::Error| EngineError::Load(format!("worker launcher: {e}"));
        let sockets = tempfile::Builder::new().prefix("morph-workers").tempdir().map_err(io)?;
        let cache = match &config.cache {
            Some((dir, budget)) => {
                remove_orphaned_caches(dir);
                let dir = dir.join(format!("{CACHE_PREFIX}{}", std::process::id()));
                Some(Mutex::new(HostCache::new(dir, *budget).map_err(io)?))
            }
            None => None,
        };
        let parked = Mutex::new(Vec::new());
        Ok(Self { config, model, sockets, cache, parked, spawned: AtomicU32::new(0) })
    }

    /// Starts a replica of `unit`: hot if one is parked, else warm if its artefact is cached,
    /// else cold. Returns its engine on its own thread and how the start went.
    pub fn start(&self, unit: UnitSpec, name: String) -> Result<(EngineWorker, StartReport), EngineError> {
        let started = Instant::now();
        if let Some((worker, pid)) = self.unpark(unit) {
            return Ok((worker, StartReport::hot(started.elapsed(), pid)));
        }
        let n = self.spawned.fetch_add(1, Ordering::Relaxed);
        let key = cache_key(unit);
        let cached = self.cache.as_ref().and_then(|c| lock(c).get(&key));
        let staging = match (&cached, &self.cache) {
            (None, Some(cache)) => Some(lock(cache).staging(&key, n)),
            _ => None,
        };
        let socket = self.sockets.path().join(format!("w{n}.sock"));
        let listener = Listener::bind(&Endpoint::Unix(socket))
            .map_err(|e| EngineError::Load(format!("worker socket: {e}")))?;
        let endpoint = listener.endpoint().map_err(|e| EngineError::Load(e.to_string()))?;
        let child =
            self.command(unit, &endpoint, cached.as_ref(), staging.as_ref()).spawn().map_err(|e| {
                EngineError::Load(format!("cannot start {} worker: {e}", self.config.exe.display()))
            })?;
        let deadline = started + self.config.start_timeout;
        let engine =
            RemoteEngine::accept(&listener, Some(child), unit.runtime, deadline, self.config.batch_timeout)?;
        let kind = if cached.is_some() { StartKind::Warm } else { StartKind::Cold };
        let report = StartReport::new(kind, started.elapsed(), engine.boot());
        if let (Some(staging), Some(cache)) = (staging, &self.cache) {
            lock(cache).admit(&key, &staging);
        }
        let pid = engine.pid();
        let worker = EngineWorker::spawn(name, Box::new(engine))
            .map_err(|e| EngineError::Load(format!("worker {pid} thread: {e}")))?;
        Ok((worker, report))
    }

    fn command(
        &self,
        unit: UnitSpec,
        endpoint: &Endpoint,
        prepared: Option<&PathBuf>,
        prepare: Option<&PathBuf>,
    ) -> Command {
        let mut cmd = Command::new(&self.config.exe);
        let threads = unit.threads;
        let unit = serde_json::to_string(&unit).unwrap_or_default();
        cmd.arg("worker")
            .arg(format!("--connect={endpoint}"))
            .arg(format!("--unit={unit}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        match &self.model {
            WorkerModel::Encoder { dir, library, pooling, plans } => {
                cmd.arg("--model").arg(dir).arg("--ort-library").arg(library);
                cmd.arg(format!("--pooling={pooling}"));
                if !plans.is_empty() {
                    let plans: Vec<String> = plans.iter().map(|p| p.0.to_string()).collect();
                    cmd.arg(format!("--plans={}", plans.join(",")));
                }
            }
            WorkerModel::DecoderStages { gguf } => {
                cmd.arg("--gguf").arg(gguf);
                // candle's kernels size their thread pool from rayon's variable.
                if let Some(threads) = threads {
                    cmd.env("RAYON_NUM_THREADS", threads.to_string());
                }
            }
        }
        if let Some(dir) = prepared {
            cmd.arg("--prepared").arg(dir);
        }
        if let Some(dir) = prepare {
            cmd.arg("--prepare").arg(dir);
        }
        cmd
    }

    /// Keeps a retired replica loaded for a later hot start, if there is room; gives it back
    /// (to be stopped) if not.
    pub fn park(&self, unit: UnitSpec, worker: EngineWorker, pid: u32) -> Option<EngineWorker> {
        let mut parked = lock(&self.parked);
        if parked.len() >= self.config.parked {
            return Some(worker);
        }
        parked.push((unit, worker, pid));
        None
    }

    fn unpark(&self, unit: UnitSpec) -> Option<(EngineWorker, u32)> {
        let mut parked = lock(&self.parked);
        let at = parked.iter().position(|(u, _, _)| *u == unit)?;
        let (_, worker, pid) = parked.swap_remove(at);
        Some((worker, pid))
    }

    /// The host cache: its artefacts, bytes held, budget and evictions so far.
    pub fn cache_state(&self) -> Option<(Vec<CachedArtefact>, u64, u64, u64)> {
        let cache = lock(self.cache.as_ref()?);
        Some((cache.contents(), cache.bytes(), cache.budget(), cache.evictions()))
    }

    /// Stops the parked replicas and empties the host cache.
    pub fn shutdown(&self) {
        let parked: Vec<_> = lock(&self.parked).drain(..).collect();
        drop(parked);
        if let Some(cache) = &self.cache {
            lock(cache).clear();
        }
    }

    /// Units of the replicas parked now.
    pub fn parked(&self) -> Vec<UnitSpec> {
        lock(&self.parked).iter().map(|(u, _, _)| *u).collect()
    }
}

/// A server's host cache folder is this and its process id.
const CACHE_PREFIX: &str = "morph-cache-";

/// Removes the host caches of servers that are gone (killed before they could clean up).
fn remove_orphaned_caches(parent: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        let pid =
            name.to_str().and_then(|n| n.strip_prefix(CACHE_PREFIX)).and_then(|p| p.parse::<u32>().ok());
        if let Some(pid) = pid
            && !std::path::Path::new(&format!("/proc/{pid}")).exists()
        {
            tracing::info!(folder = %entry.path().display(), "removing the host cache of a server that is gone");
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A unit's name as a file name.
fn cache_key(unit: UnitSpec) -> String {
    unit.to_string().chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
