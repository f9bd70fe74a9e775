//! Starting `morph worker` processes on this host: the command line for a unit, and the choice
//! between a warm start (the unit's prepared artefact is in this host's cache) and a cold one
//! (from the weights; the artefact it prepares is staged, then taken into the cache once the
//! worker is up). The server's launcher uses it for local replicas, a host agent for its host's.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::remote::Endpoint;
use morph_core::{StartKind, TokenPlan, UnitSpec};
use morph_engine::EngineError;

use super::cache::{CachedArtefact, HostCache};
use crate::locking::lock;

/// What a worker process runs besides its unit, as its engine describes it
/// (`morph_backend`'s `EngineConfig::worker_model`).
#[derive(Debug, Clone)]
pub struct WorkerModel {
    /// The model's name (its folder's or file's), as the cluster's records show it.
    pub name: String,
    /// The flags of `morph worker` that load it (`--model DIR --ort-library FILE ...`).
    pub args: Vec<OsString>,
    /// The token plans every worker compiles besides the plain model (sent to an agent).
    pub plans: Vec<TokenPlan>,
    /// What its prepared artefacts differ by besides the unit (an encoder's dtype), in their
    /// cache keys; empty for nothing.
    pub variant: String,
    /// The environment variable its kernels size their thread pool from (candle's: rayon's),
    /// set to the unit's threads.
    pub threads_env: Option<&'static str>,
}

impl WorkerModel {
    /// The name of a model at `path`: its folder's or file's.
    pub fn name_of(path: &std::path::Path) -> String {
        let stem = path.file_stem().or_else(|| path.file_name());
        stem.map_or_else(|| path.display().to_string(), |s| s.to_string_lossy().into_owned())
    }
}

/// A started worker process, how it starts, and the artefact it prepares (if cold and cached).
#[derive(Debug)]
pub struct Spawned {
    pub child: Child,
    pub kind: StartKind,
    pub staging: Option<Staging>,
}

/// Where a cold start prepares the artefact of `key`.
#[derive(Debug)]
pub struct Staging {
    key: String,
    dir: PathBuf,
}

/// Starts workers of one model on this host, with this host's cache.
#[derive(Debug)]
pub struct Spawner {
    exe: PathBuf,
    model: WorkerModel,
    cache: Option<Mutex<HostCache>>,
    spawned: AtomicU32,
}

impl Spawner {
    /// Workers of `model` run by the binary `exe`; `cache`: the host cache's parent folder (a
    /// tmpfs) and budget in bytes, `None` for none (every start cold).
    pub fn new(exe: PathBuf, model: WorkerModel, cache: Option<&(PathBuf, u64)>) -> std::io::Result<Self> {
        let cache = match cache {
            Some((dir, budget)) => {
                remove_orphaned_caches(dir);
                let dir = dir.join(format!("{CACHE_PREFIX}{}", std::process::id()));
                Some(Mutex::new(HostCache::new(dir, *budget)?))
            }
            None => None,
        };
        Ok(Self { exe, model, cache, spawned: AtomicU32::new(0) })
    }

    pub fn model(&self) -> &WorkerModel {
        &self.model
    }

    /// Starts a worker of `unit` that connects to `endpoint`, with `extra` flags and `env`
    /// variables: warm if its artefact is cached, else cold (it prepares one in a staging folder
    /// of its own, numbered, so that workers started at once never share one).
    pub fn spawn(
        &self,
        unit: UnitSpec,
        endpoint: &Endpoint,
        extra: &[String],
        env: &[(&str, &str)],
    ) -> Result<Spawned, EngineError> {
        let n = self.spawned.fetch_add(1, Ordering::Relaxed);
        let key = cache_key(&self.model, unit);
        let cached = self.cache.as_ref().and_then(|c| lock(c).get(&key));
        let staging = match (&cached, &self.cache) {
            (None, Some(cache)) => Some(Staging { dir: lock(cache).staging(&key, n), key }),
            _ => None,
        };
        let mut cmd = self.command(unit, endpoint);
        if let Some(dir) = &cached {
            cmd.arg("--prepared").arg(dir);
        }
        if let Some(staging) = &staging {
            cmd.arg("--prepare").arg(&staging.dir);
        }
        cmd.args(extra).envs(env.iter().copied());
        let child = cmd
            .spawn()
            .map_err(|e| EngineError::Load(format!("cannot start {} worker: {e}", self.exe.display())))?;
        let kind = if cached.is_some() { StartKind::Warm } else { StartKind::Cold };
        Ok(Spawned { child, kind, staging })
    }

    /// The worker that prepared `staging` is up: its artefact goes into the cache.
    pub fn admit(&self, staging: Staging) {
        if let Some(cache) = &self.cache {
            lock(cache).admit(&staging.key, &staging.dir);
        }
    }

    /// The worker that was to prepare `staging` failed: its leftovers are removed.
    pub fn discard(&self, staging: Staging) {
        let _ = std::fs::remove_dir_all(staging.dir);
    }

    fn command(&self, unit: UnitSpec, endpoint: &Endpoint) -> Command {
        let mut cmd = Command::new(&self.exe);
        let threads = unit.threads;
        let unit = serde_json::to_string(&unit).unwrap_or_default();
        cmd.arg("worker")
            .arg(format!("--connect={endpoint}"))
            .arg(format!("--unit={unit}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        cmd.args(&self.model.args);
        if let (Some(threads), Some(variable)) = (threads, self.model.threads_env) {
            cmd.env(variable, threads.to_string());
        }
        cmd
    }

    /// The host cache: its artefacts, bytes held, budget and evictions so far.
    pub fn cache_state(&self) -> Option<(Vec<CachedArtefact>, u64, u64, u64)> {
        let cache = lock(self.cache.as_ref()?);
        Some((cache.contents(), cache.bytes(), cache.budget(), cache.evictions()))
    }

    /// Empties the host cache: host memory is given back.
    pub fn clear_cache(&self) {
        if let Some(cache) = &self.cache {
            lock(cache).clear();
        }
    }
}

/// A server's (or agent's) host cache folder is this and its process id.
const CACHE_PREFIX: &str = "morph-cache-";

/// Removes the host caches of processes that are gone (killed before they could clean up).
fn remove_orphaned_caches(parent: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        let pid =
            name.to_str().and_then(|n| n.strip_prefix(CACHE_PREFIX)).and_then(|p| p.parse::<u32>().ok());
        if let Some(pid) = pid
            && !std::path::Path::new(&format!("/proc/{pid}")).exists()
        {
            tracing::info!(folder = %entry.path().display(), "removing the host cache of a process that is gone");
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A unit's name (and the model's variant, an encoder's dtype: its graphs differ by it) as a
/// file name.
fn cache_key(model: &WorkerModel, unit: UnitSpec) -> String {
    let name = match model.variant.as_str() {
        "" => unit.to_string(),
        variant => format!("{variant}-{unit}"),
    };
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect()
}
