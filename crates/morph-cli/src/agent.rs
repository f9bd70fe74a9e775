//! `morph agent`: one per host. It registers the host in etcd (its address, its slots, its host
//! cache) and starts `morph worker` processes on it when a server asks, until Ctrl-C/SIGTERM.

use anyhow::Context;
use clap::Args;
use morph_worker::cluster::agent::{Agent, AgentConfig};
use morph_worker::host::Spawner;

use crate::cluster_args::{ClusterArgs, HostCacheArgs, host_name};
use crate::worker_model_args::WorkerModelArgs;

#[derive(Debug, Args)]
pub(crate) struct AgentArgs {
    /// The agent's port for servers' requests (0: any free port).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Replicas this host may run at once (default: its cores).
    #[arg(long)]
    slots: Option<u16>,
    /// The host's name in the cluster (default: the system's host name).
    #[arg(long)]
    host_name: Option<String>,
    #[command(flatten)]
    cluster: ClusterArgs,
    #[command(flatten)]
    cache: HostCacheArgs,
    #[command(flatten)]
    model: WorkerModelArgs,
}

pub(crate) fn run(args: AgentArgs) -> anyhow::Result<()> {
    let cluster = args.cluster.config()?.context("an agent needs --etcd (the cluster's registry)")?;
    let address = args.cluster.advertise()?;
    let slots = args.slots.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, |n| n.get().min(usize::from(u16::MAX)) as u16)
    });
    anyhow::ensure!(slots >= 1, "--slots must be at least 1");
    let spawner =
        Spawner::new(std::env::current_exe()?, args.model.worker_model()?, args.cache.cache().as_ref())?;
    let config = AgentConfig { cluster, name: host_name(args.host_name.as_deref()), address, slots };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let bind = std::net::SocketAddr::new(address, args.port);
        let listener =
            tokio::net::TcpListener::bind(bind).await.with_context(|| format!("binding {bind}"))?;
        let port = listener.local_addr()?.port();
        let agent = tokio::task::spawn_blocking(move || Agent::register(config, spawner, port)).await??;
        println!("morph agent listening on http://{}", listener.local_addr()?);
        agent.run(listener, crate::listen::shutdown_signal()).await?;
        Ok(())
    })
}
