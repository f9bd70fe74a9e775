//! The worker's side: connect to the server, build the engine, run one first batch, report
//! how the start went, then answer batches until the server says stop or goes away.

use std::io;
use std::time::Instant;

use super::endpoint::Endpoint;
use crate::wire::{self, Boot, FromWorker, ToWorker};
use morph_engine::{Engine, EngineError, Rows, StartTimes};

/// A worker's engine, how its start went, and the batch it runs first (to be ready for real
/// ones: ONNX Runtime allocates on its first run).
#[allow(missing_debug_implementations)]
pub struct Built {
    pub engine: Box<dyn Engine>,
    pub prepared: bool,
    pub times: StartTimes,
    pub first: Rows,
}

/// Connects to `endpoint`, greets the server (a server of another protocol version is refused
/// here, before anything loads), presents `token`, and serves there with the engine `build`
/// makes; `ready` is called once the server has been told the engine is up (and may keep what
/// it returns, such as a registration, until the end). Returns when the server says stop or
/// closes the connection; a build failure is reported to the server too.
pub fn serve_engine<K>(
    endpoint: &Endpoint,
    token: Option<&str>,
    build: impl FnOnce() -> Result<Built, EngineError>,
    ready: impl FnOnce(&Boot) -> K,
) -> io::Result<()> {
    let mut stream = endpoint.connect()?;
    wire::greet(&mut stream)?;
    wire::check_greeting(&mut stream, "the server")?;
    wire::send(&mut stream, &FromWorker::Hello { token: token.map(str::to_string) })?;
    let mut built = match build() {
        Ok(built) => built,
        Err(e) => {
            wire::send(&mut stream, &FromWorker::Failed(e.clone()))?;
            return Err(io::Error::other(e));
        }
    };
    let first = Instant::now();
    if let Err(e) = built.engine.run(built.first.as_input(), morph_core::TokenPlan::Plain) {
        wire::send(&mut stream, &FromWorker::Failed(e.clone()))?;
        return Err(io::Error::other(e));
    }
    let boot = Boot {
        pid: std::process::id(),
        dim: built.engine.dim(),
        prepared: built.prepared,
        times: built.times,
        first_batch: first.elapsed(),
        packs: built.engine.packs(morph_core::TokenPlan::Plain),
    };
    wire::send(&mut stream, &FromWorker::Ready(boot.clone()))?;
    let _kept = ready(&boot);
    loop {
        match wire::recv::<ToWorker>(&mut stream) {
            Ok(ToWorker::Run { plan, rows }) => {
                let result = built.engine.run(rows.as_input(), plan);
                wire::send(&mut stream, &FromWorker::Done(result))?;
            }
            Ok(ToWorker::Stop) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}
