//! Flags shared by `morph serve`, `morph worker` and `morph agent` for a cluster found through
//! etcd, and for a host's cache of prepared artefacts.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use morph_worker::cluster::agent::CLUSTER_TOKEN_ENV;
use morph_worker::cluster::{ClusterConfig, ClusterToken};

#[derive(Debug, Clone, Args)]
pub(crate) struct ClusterArgs {
    /// etcd's client URL (such as http://10.0.0.1:2379): hosts and workers register there and
    /// find each other. Without it, everything runs on this host and no etcd is needed.
    #[arg(long)]
    etcd: Option<String>,
    /// Name of the deployment in etcd (several may share one etcd).
    #[arg(long, default_value = "default")]
    cluster: String,
    /// Seconds after which a host or worker that stopped renewing its registration (dead,
    /// frozen or cut off) is gone, and its requests fail over (etcd's minimum is about 2).
    #[arg(long, default_value_t = 2.0)]
    lease_ttl_s: f64,
    /// This host's address, as the other hosts reach it.
    #[arg(long)]
    pub(crate) advertise: Option<IpAddr>,
    /// A file holding the secret every host of the cluster shares (else the MORPH_CLUSTER_TOKEN
    /// environment variable): the agents' API and the workers' connections refuse whoever does
    /// not present it. Without one, anyone who reaches an agent can start workers there.
    #[arg(long)]
    cluster_token_file: Option<PathBuf>,
}

impl ClusterArgs {
    /// The cluster's settings, or `None` without --etcd.
    pub(crate) fn config(&self) -> anyhow::Result<Option<ClusterConfig>> {
        let Some(etcd) = &self.etcd else { return Ok(None) };
        anyhow::ensure!(
            etcd.starts_with("http://") || etcd.starts_with("https://"),
            "--etcd {etcd}: expected etcd's client URL, such as http://10.0.0.1:2379"
        );
        anyhow::ensure!(
            self.lease_ttl_s.is_finite() && self.lease_ttl_s >= 1.0,
            "--lease-ttl-s must be at least 1 second, got {}",
            self.lease_ttl_s
        );
        anyhow::ensure!(
            !self.cluster.is_empty() && !self.cluster.contains('/'),
            "--cluster {:?}: a name without '/'",
            self.cluster
        );
        let lease_ttl = Duration::from_secs_f64(self.lease_ttl_s);
        let token = match &self.cluster_token_file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("--cluster-token-file {}", path.display()))?;
                let token = ClusterToken::new(&text);
                Some(token.with_context(|| format!("--cluster-token-file {} is empty", path.display()))?)
            }
            None => std::env::var(CLUSTER_TOKEN_ENV).ok().and_then(|t| ClusterToken::new(&t)),
        };
        Ok(Some(ClusterConfig { etcd: etcd.clone(), cluster: self.cluster.clone(), lease_ttl, token }))
    }

    /// --advertise, required with --etcd.
    pub(crate) fn advertise(&self) -> anyhow::Result<IpAddr> {
        self.advertise.ok_or_else(|| {
            anyhow::anyhow!("--etcd needs --advertise IP: the address other hosts reach this one at")
        })
    }
}

#[derive(Debug, Clone, Args)]
pub(crate) struct HostCacheArgs {
    /// Host-memory budget of the prepared-artefact cache in MiB (LRU eviction above 85%); 0
    /// turns the cache off: every worker start is cold.
    #[arg(long, default_value_t = 1024)]
    host_cache_mb: u64,
    /// Folder of the host cache; it should be a tmpfs (memory). Default: /dev/shm, else the
    /// temporary folder.
    #[arg(long)]
    host_cache_dir: Option<PathBuf>,
}

impl HostCacheArgs {
    /// The cache's folder and budget in bytes, or `None` for no cache.
    pub(crate) fn cache(&self) -> Option<(PathBuf, u64)> {
        let dir = self.host_cache_dir.clone().unwrap_or_else(|| {
            let shm = PathBuf::from("/dev/shm");
            if shm.is_dir() { shm } else { std::env::temp_dir() }
        });
        (self.host_cache_mb > 0).then_some((dir, self.host_cache_mb << 20))
    }
}

/// `name` (--host-name), else the system's host name.
pub(crate) fn host_name(name: Option<&str>) -> String {
    name.map(str::to_string).unwrap_or_else(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map_or_else(|_| "host".into(), |s| s.trim().to_string())
    })
}
