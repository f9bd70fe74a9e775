//! Listening at once and serving what a start builds, until a shutdown signal.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use morph_server::drain::Drain;
use morph_server::{ConnectionLimits, Server, Serving, StartupSteps};

/// Listens on `addr` at once and serves what `build` makes once it has made it (see
/// [`Server::serve_once_built`]), until a shutdown signal; `announce` logs what serves.
pub(crate) fn serve_built<S: Serving>(
    addr: SocketAddr,
    limits: ConnectionLimits,
    build: impl FnOnce(&StartupSteps, Arc<Drain>) -> anyhow::Result<S> + Send + 'static,
    announce: impl FnOnce(&S),
) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let served = runtime.block_on(async move {
        let listener =
            tokio::net::TcpListener::bind(addr).await.with_context(|| format!("binding {addr}"))?;
        let address = listener.local_addr()?;
        tracing::info!(%address, "listening; /ready answers 503 with the start's step until the model serves");
        let steps = StartupSteps::default();
        let build_steps = steps.clone();
        let serving = |built: &S| {
            println!("morph listening on http://{address}");
            announce(built);
        };
        Server::serve_once_built(listener, limits, shutdown_signal(), steps, move |drain| build(&build_steps, drain), serving)
            .await?;
        tracing::info!("drained, stopped");
        anyhow::Ok(())
    });
    // A shutdown while starting leaves the start's thread behind: it is not waited for.
    runtime.shutdown_background();
    served
}

/// Resolves on Ctrl-C or SIGTERM.
pub(crate) async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutting down: draining in-flight requests");
}
