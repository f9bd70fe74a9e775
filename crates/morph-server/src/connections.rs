//! Accepting and serving HTTP connections with limits a slow or stalled client cannot get
//! around: the request head must arrive within `header_timeout` (also between requests on a
//! kept-alive connection), at most `max_connections` are open at once (further clients wait in
//! the listen backlog), and at shutdown in-flight calls get `drain_timeout` to finish; those
//! left are then answered with a 503 ([`Drain`]) and the connections closed. (The body's own deadline is the `Body` extractor's.)

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::drain::Drain;

/// Deadlines and caps for client connections.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConnectionLimits {
    /// The longest a client may take to send a request's head (and the longest a kept-alive
    /// connection may sit idle before its next request).
    pub header_timeout: Duration,
    /// The longest a client may take to send a request's body.
    pub body_timeout: Duration,
    /// Connections open at once; more wait to be accepted.
    pub max_connections: usize,
    /// At shutdown, how long in-flight calls may take before their connections are closed.
    pub drain_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            max_connections: 1024,
            drain_timeout: Duration::from_secs(30),
        }
    }
}

/// Serves `app` on `listener` until `shutdown` resolves, then drains (see the module doc).
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
    drain: Arc<Drain>,
) {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(limits.header_timeout);
    let open = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            permit = open.clone().acquire_owned() => permit,
            () = &mut shutdown => break,
        };
        let Ok(permit) = permit else { break };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a connection failed");
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service).into_owned());
        tokio::spawn(async move {
            // A client that went away or stalled past a deadline ends its connection here.
            let _ = connection.await;
            drop(permit);
        });
    }
    drop(listener);
    drain.begin();
    let closed = graceful.shutdown();
    tokio::pin!(closed);
    if tokio::time::timeout(limits.drain_timeout, &mut closed).await.is_err() {
        tracing::warn!(after = ?limits.drain_timeout, "drain deadline passed: answering the calls left with 503");
        drain.deadline_passed();
        if tokio::time::timeout(ANSWER_GRACE, closed).await.is_err() {
            tracing::warn!("connections still open after their calls were answered: closing them");
        }
    }
}

/// After the drain deadline, how long the calls left have to send their 503s.
const ANSWER_GRACE: Duration = Duration::from_secs(2);
