//! `--workers process` and its settings for `morph serve`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use morph_server::launcher::ProcessConfig;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum WorkersArg {
    /// Every instance is a thread of the server, sharing one copy of the weights.
    Thread,
    /// Every encoder replica (or decoder prefill stage) is a `morph worker` process reached
    /// over a Unix socket, started cold (weights from disk), warm (its prepared form from the
    /// host cache) or hot (a parked replica); a crashed or silent worker fails its batch and is
    /// replaced.
    Process,
}

#[derive(Debug, Clone, Args)]
pub(crate) struct ProcessArgs {
    /// Where instances run (process: needs --engine ort, or --task generate with --stages).
    #[arg(long, value_enum, default_value = "thread")]
    workers: WorkersArg,
    /// Host-memory budget of the prepared-artefact cache in MiB (LRU eviction above 85%); 0
    /// turns the cache off: every worker start is cold.
    #[arg(long, default_value_t = 1024)]
    host_cache_mb: u64,
    /// Folder of the host cache; it should be a tmpfs (memory). Default: /dev/shm, else the
    /// temporary folder.
    #[arg(long)]
    host_cache_dir: Option<PathBuf>,
    /// Retired worker processes kept loaded for hot starts.
    #[arg(long, default_value_t = 2)]
    parked: usize,
    /// Seconds a starting worker may take to report its engine built before it is killed.
    #[arg(long, default_value_t = 120.0)]
    worker_start_timeout_s: f64,
    /// Seconds a worker may take to answer one batch before it is declared dead and killed.
    #[arg(long, default_value_t = 30.0)]
    worker_batch_timeout_s: f64,
}

impl ProcessArgs {
    /// The worker-process settings, or `None` for threads.
    pub(crate) fn config(&self) -> anyhow::Result<Option<ProcessConfig>> {
        if self.workers == WorkersArg::Thread {
            return Ok(None);
        }
        for (flag, s) in [
            ("--worker-start-timeout-s", self.worker_start_timeout_s),
            ("--worker-batch-timeout-s", self.worker_batch_timeout_s),
        ] {
            anyhow::ensure!(s.is_finite() && s > 0.0, "{flag} must be a positive number of seconds, got {s}");
        }
        let dir = self.host_cache_dir.clone().unwrap_or_else(|| {
            let shm = PathBuf::from("/dev/shm");
            if shm.is_dir() { shm } else { std::env::temp_dir() }
        });
        let cache = (self.host_cache_mb > 0).then_some((dir, self.host_cache_mb << 20));
        Ok(Some(ProcessConfig {
            exe: std::env::current_exe()?,
            cache,
            parked: self.parked,
            start_timeout: Duration::from_secs_f64(self.worker_start_timeout_s),
            batch_timeout: Duration::from_secs_f64(self.worker_batch_timeout_s),
        }))
    }
}
