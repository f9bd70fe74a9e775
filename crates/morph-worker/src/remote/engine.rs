//! The server's side of one worker process: an [`Engine`] whose batches run in the worker. A
//! worker that exits, closes its connection, answers nothing within the batch timeout or is
//! cut off ([`Severer`]: its host is declared dead) is lost: it is killed, and the batch (and
//! every later one) fails with [`EngineError::Lost`].

use std::fmt;
use std::io;
use std::process::Child;
use std::time::{Duration, Instant};

use morph_core::{RuntimeSpec, TokenPlan};

use super::endpoint::{Listener, Stream};
use crate::wire::{self, Boot, FromWorker, ToWorker};
use morph_engine::{BatchInput, Engine, EngineError, Rows};

/// The process behind a worker, as the side that asked for it can reach it: a child of this
/// process, or one a host agent started on another host.
pub trait WorkerProcess: Send + fmt::Debug {
    /// How it ended, if it has exited (asked while waiting for it to connect).
    fn exited(&mut self) -> Option<String>;
    /// Kills it if it still runs; says how it ended.
    fn kill(&mut self) -> String;
    /// It was told to stop: waits up to `grace` for it to exit, then kills it.
    fn stop(&mut self, grace: Duration);
}

impl WorkerProcess for Child {
    fn exited(&mut self) -> Option<String> {
        match self.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            _ => None,
        }
    }

    fn kill(&mut self) -> String {
        let _ = Child::kill(self);
        self.wait().map_or_else(|e| e.to_string(), |s| s.to_string())
    }

    fn stop(&mut self, grace: Duration) {
        let deadline = Instant::now() + grace;
        while matches!(self.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = WorkerProcess::kill(self);
    }
}

/// Cuts a worker's connection from outside (its registration expired): the batch waiting on
/// it fails at once as lost, instead of at the batch timeout.
#[derive(Debug)]
pub struct Severer(Stream);

impl Severer {
    pub fn sever(&self) {
        self.0.shutdown();
    }
}

/// One connected, started worker.
#[derive(Debug)]
pub struct RemoteEngine {
    stream: Option<Stream>,
    /// The worker's process, when this side asked for it.
    process: Option<Box<dyn WorkerProcess>>,
    runtime: RuntimeSpec,
    boot: Boot,
    batch_timeout: Duration,
}

impl RemoteEngine {
    /// Waits on `listener` (until `deadline`) for the worker `child` (if this side started it)
    /// to connect and report its engine built; a worker that exits first, fails to build or
    /// never connects is killed and its reason returned.
    pub fn accept(
        listener: &Listener,
        mut process: Option<Box<dyn WorkerProcess>>,
        runtime: RuntimeSpec,
        deadline: Instant,
        batch_timeout: Duration,
        token: Option<&str>,
    ) -> Result<Self, EngineError> {
        let started = Self::handshake(listener, process.as_mut(), deadline, token);
        match started {
            Ok((stream, boot)) => Ok(Self { stream: Some(stream), process, runtime, boot, batch_timeout }),
            Err(e) => {
                if let Some(mut process) = process {
                    process.kill();
                }
                Err(e)
            }
        }
    }

    /// The worker's greeting (its protocol version) and token, then its report of the engine
    /// built; with `token`, a worker that does not present it is refused.
    fn handshake(
        listener: &Listener,
        mut process: Option<&mut Box<dyn WorkerProcess>>,
        deadline: Instant,
        token: Option<&str>,
    ) -> Result<(Stream, Boot), EngineError> {
        let lost = |e: io::Error| EngineError::Lost(format!("worker did not start: {e}"));
        let exited = || {
            let status = process.as_mut()?.exited()?;
            Some(io::Error::other(format!("the worker exited ({status})")))
        };
        let mut stream = listener.accept(deadline, exited).map_err(lost)?;
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        stream.set_read_timeout(Some(left)).map_err(lost)?;
        let refused = |e: io::Error| EngineError::Lost(format!("worker refused: {e}"));
        wire::greet(&mut stream).map_err(lost)?;
        wire::check_greeting(&mut stream, "the worker").map_err(refused)?;
        match wire::recv::<FromWorker>(&mut stream).map_err(lost)? {
            FromWorker::Hello { token: given } if wire::token_matches(token, given.as_deref()) => {}
            FromWorker::Hello { .. } => {
                return Err(EngineError::Lost(
                    "worker refused: it did not present this cluster's token (MORPH_CLUSTER_TOKEN or --cluster-token-file)".into(),
                ));
            }
            _ => return Err(EngineError::Lost("worker refused: it did not say hello first".into())),
        }
        match wire::recv::<FromWorker>(&mut stream).map_err(lost)? {
            FromWorker::Ready(boot) => Ok((stream, boot)),
            FromWorker::Failed(e) => Err(e),
            FromWorker::Done(_) => Err(EngineError::Lost("the worker answered a batch nobody sent".into())),
            FromWorker::Hello { .. } => Err(EngineError::Lost("the worker said hello twice".into())),
        }
    }

    /// How the worker started, as it measured.
    pub fn boot(&self) -> &Boot {
        &self.boot
    }

    /// The worker's process id (as it reported it).
    pub fn pid(&self) -> u32 {
        self.boot.pid
    }

    /// A handle that cuts this worker's connection from another thread.
    pub fn severer(&self) -> Option<Severer> {
        self.stream.as_ref()?.try_clone().ok().map(Severer)
    }

    fn exchange(&mut self, plan: TokenPlan, rows: Rows) -> Result<Vec<Vec<f32>>, EngineError> {
        let Some(stream) = self.stream.as_mut() else {
            return Err(EngineError::Lost("the worker was lost earlier".into()));
        };
        let sent = stream
            .set_read_timeout(Some(self.batch_timeout))
            .and_then(|()| wire::send(stream, &ToWorker::Run { plan, rows }))
            .and_then(|()| wire::recv::<FromWorker>(stream));
        match sent {
            Ok(FromWorker::Done(result)) => result,
            Ok(_) => Err(self.lose("answered a batch with another message".into())),
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                Err(self.lose(format!("no answer within {:?}; declared dead", self.batch_timeout)))
            }
            Err(e) => Err(self.lose(format!("connection lost mid-batch ({e})"))),
        }
    }

    /// The worker is gone or declared dead: kill it (if ours) and say why.
    fn lose(&mut self, why: String) -> EngineError {
        self.stream = None;
        let status = self.process.as_mut().map(|p| p.kill());
        let pid = self.boot.pid;
        let status = status.map_or_else(String::new, |s| format!(", {s}"));
        EngineError::Lost(format!("worker process {pid} {why}{status}"))
    }
}

impl Engine for RemoteEngine {
    fn runtime(&self) -> RuntimeSpec {
        self.runtime
    }

    fn dim(&self) -> usize {
        self.boot.dim
    }

    fn packs(&self, plan: TokenPlan) -> bool {
        self.boot.packs && plan.keeps_tokens_in_place()
    }

    fn run(&mut self, input: BatchInput<'_>, plan: TokenPlan) -> Result<Vec<Vec<f32>>, EngineError> {
        self.exchange(plan, Rows::from(input))
    }
}

impl Drop for RemoteEngine {
    /// Asks the worker to stop; kills it if it has not exited within a second.
    fn drop(&mut self) {
        if let Some(mut stream) = self.stream.take() {
            let _ = wire::send(&mut stream, &ToWorker::Stop);
        }
        if let Some(mut process) = self.process.take() {
            process.stop(Duration::from_secs(1));
        }
    }
}
