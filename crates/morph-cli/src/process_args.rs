//! `--workers process` and its settings for `morph serve`.

use std::time::Duration;

use clap::{Args, ValueEnum};
use morph_worker::ProcessConfig;
use morph_worker::cluster::hosts::RemoteConfig;

use crate::cluster_args::{ClusterArgs, HostCacheArgs};

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
    /// Where instances run (process: needs --engine ort, or --task generate with --stages;
    /// --etcd implies it).
    #[arg(long, value_enum, default_value = "thread")]
    workers: WorkersArg,
    #[command(flatten)]
    cache: HostCacheArgs,
    /// With --etcd: replicas run on the hosts whose agents (`morph agent`) registered
    /// there, none on this one.
    #[command(flatten)]
    cluster: ClusterArgs,
    /// With --etcd: hosts to wait for at start-up (serving the same model).
    #[arg(long, default_value_t = 1)]
    hosts: usize,
    /// With --etcd: seconds to wait for them.
    #[arg(long, default_value_t = 60.0)]
    wait_hosts_s: f64,
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
        let cluster = self.cluster.config()?;
        if self.workers == WorkersArg::Thread && cluster.is_none() {
            return Ok(None);
        }
        for (flag, s) in [
            ("--worker-start-timeout-s", self.worker_start_timeout_s),
            ("--worker-batch-timeout-s", self.worker_batch_timeout_s),
            ("--wait-hosts-s", self.wait_hosts_s),
        ] {
            anyhow::ensure!(s.is_finite() && s > 0.0, "{flag} must be a positive number of seconds, got {s}");
        }
        let remote = match cluster {
            Some(cluster) => {
                anyhow::ensure!(self.hosts >= 1, "--hosts must be at least 1");
                let advertise = self.cluster.advertise()?;
                let wait = Duration::from_secs_f64(self.wait_hosts_s);
                Some(RemoteConfig { cluster, advertise, hosts: self.hosts, wait })
            }
            None => None,
        };
        Ok(Some(ProcessConfig {
            exe: std::env::current_exe()?,
            cache: self.cache.cache(),
            parked: self.parked,
            start_timeout: Duration::from_secs_f64(self.worker_start_timeout_s),
            batch_timeout: Duration::from_secs_f64(self.worker_batch_timeout_s),
            remote,
        }))
    }
}
