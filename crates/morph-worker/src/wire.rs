//! The binary framed transport between the server and a `morph worker` process, over a Unix
//! socket or TCP alike. Each side first sends its greeting ([`greet`]: `MORPH` and the
//! protocol's version, raw), so that builds that would misread each other's frames refuse each
//! other in one clear line; then every frame is a 4-byte little-endian length and one message
//! encoded with postcard (a compact serde format: a batch's floats travel as their 4 bytes
//! each). The worker's first frame is its [`FromWorker::Hello`], with the cluster's token.

use std::io::{self, Read, Write};

use morph_core::TokenPlan;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use morph_engine::{EngineError, Rows, StartTimes};

/// The largest frame either side accepts (a batch of hidden states is megabytes, not more).
pub const MAX_FRAME: usize = 1 << 30;

/// The version of the messages below: raise it whenever their encoding changes.
pub const PROTOCOL: u32 = 2;

/// What every greeting starts with.
const MAGIC: [u8; 5] = *b"MORPH";

/// Sends this side's greeting: `MORPH` and [`PROTOCOL`], little-endian.
pub fn greet(stream: &mut impl Write) -> io::Result<()> {
    stream.write_all(&MAGIC)?;
    stream.write_all(&PROTOCOL.to_le_bytes())?;
    stream.flush()
}

/// Reads the greeting of `peer` ("the worker", "the server"): one of another protocol version,
/// or not a morph process at all, is refused with a line that says so.
pub fn check_greeting(stream: &mut impl Read, peer: &str) -> io::Result<()> {
    let mut greeting = [0u8; 9];
    stream.read_exact(&mut greeting)?;
    let refused = |why: String| Err(io::Error::new(io::ErrorKind::InvalidData, why));
    if greeting[..5] != MAGIC {
        return refused(format!(
            "{peer} does not speak Morph's worker protocol (a build before version 1, or not morph)"
        ));
    }
    let theirs = u32::from_le_bytes([greeting[5], greeting[6], greeting[7], greeting[8]]);
    match theirs == PROTOCOL {
        true => Ok(()),
        false => refused(format!(
            "{peer} speaks Morph's worker protocol {theirs}, this process {PROTOCOL}: run the same morph build on every host"
        )),
    }
}

/// Whether `given` is the token `expected` (any, when none is expected), compared in constant
/// time for tokens of equal length.
pub fn token_matches(expected: Option<&str>, given: Option<&str>) -> bool {
    use subtle::ConstantTimeEq;
    match (expected, given) {
        (None, _) => true,
        (Some(expected), Some(given)) => bool::from(expected.as_bytes().ct_eq(given.as_bytes())),
        (Some(_), None) => false,
    }
}

/// What the server asks of a worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ToWorker {
    /// Run one batch under token plan `plan`; answered by one [`FromWorker::Done`].
    Run { plan: TokenPlan, rows: Rows },
    /// Finish: the worker exits.
    Stop,
}

/// What a worker tells the server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum FromWorker {
    /// The first frame: the cluster's token, if the worker has one.
    Hello { token: Option<String> },
    /// The engine is built and has run its first batch: the replica is up.
    Ready(Boot),
    /// The engine could not be built; the worker exits.
    Failed(EngineError),
    /// The outputs of the last batch, or why it failed.
    Done(Result<Vec<Vec<f32>>, EngineError>),
}

/// How a worker started, measured inside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Boot {
    pub pid: u32,
    /// Output size of the engine (the hidden size).
    pub dim: usize,
    /// Started from a prepared artefact in host memory (warm), not from the weights on disk.
    pub prepared: bool,
    pub times: StartTimes,
    /// The first batch (one short sequence), run before `Ready`.
    pub first_batch: std::time::Duration,
    /// The engine removes the padding under the plans that keep every token in place
    /// ([`morph_engine::Engine::packs`]).
    pub packs: bool,
}

/// Writes `message` as one frame and flushes.
pub fn send<T: Serialize>(stream: &mut impl Write, message: &T) -> io::Result<()> {
    let body = postcard::to_stdvec(message).map_err(io::Error::other)?;
    if body.len() > MAX_FRAME {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("a {} byte frame", body.len())));
    }
    stream.write_all(&(body.len() as u32).to_le_bytes())?;
    stream.write_all(&body)?;
    stream.flush()
}

/// Reads one frame and decodes it. A stream closed between frames is `UnexpectedEof`.
pub fn recv<T: DeserializeOwned>(stream: &mut impl Read) -> io::Result<T> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("a {len} byte frame")));
    }
    // Read as the bytes arrive: a header alone (a broken or hostile peer) allocates nothing big.
    let mut body = Vec::new();
    stream.take(len as u64).read_to_end(&mut body)?;
    if body.len() < len {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the stream ended inside a frame"));
    }
    postcard::from_bytes(&body).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use morph_core::PromptMode;

    #[test]
    fn messages_survive_a_round_trip_and_oversize_frames_are_refused() {
        let run =
            ToWorker::Run { plan: TokenPlan::Merge(2), rows: Rows::Hidden(vec![vec![1.5, -0.0, f32::MIN]]) };
        let mut buf = Vec::new();
        send(&mut buf, &run).expect("send");
        send(&mut buf, &FromWorker::Done(Err(EngineError::Stopped))).expect("send");
        let mut reader = buf.as_slice();
        assert_eq!(recv::<ToWorker>(&mut reader).expect("first"), run);
        assert_eq!(
            recv::<FromWorker>(&mut reader).expect("second"),
            FromWorker::Done(Err(EngineError::Stopped))
        );
        let eof = recv::<FromWorker>(&mut reader).expect_err("nothing left");
        assert_eq!(eof.kind(), io::ErrorKind::UnexpectedEof);

        let mut huge = ((MAX_FRAME + 1) as u32).to_le_bytes().to_vec();
        huge.extend([0; 8]);
        let err = recv::<ToWorker>(&mut huge.as_slice()).expect_err("too big");
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        let mut short = 1000u32.to_le_bytes().to_vec();
        short.extend([0; 10]);
        let err = recv::<ToWorker>(&mut short.as_slice()).expect_err("cut short");
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }

    proptest::proptest! {
        /// Whatever bytes arrive, `recv` answers a message or an error; it never panics.
        #[test]
        fn any_bytes_decode_or_fail_cleanly(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..256)) {
            let mut framed = (bytes.len() as u32).to_le_bytes().to_vec();
            framed.extend(&bytes);
            let _ = recv::<ToWorker>(&mut framed.as_slice());
            let _ = recv::<FromWorker>(&mut framed.as_slice());
            let _ = recv::<FromWorker>(&mut bytes.as_slice());
        }

        /// Every batch a server can send arrives whole: same rows, same bits.
        #[test]
        fn batches_round_trip(
            (kind, count, percent) in (0u8..6, 1usize..10_000, 1u8..100),
            rows in proptest::collection::vec(proptest::collection::vec(proptest::num::f32::NORMAL, 0..64), 0..8),
        ) {
            let plan = match kind {
                0 => TokenPlan::Plain,
                1 => TokenPlan::Merge(count),
                2 => TokenPlan::Exit(count),
                3 => TokenPlan::Prune { after: count, percent },
                4 => TokenPlan::Prompt(count, PromptMode::Additive),
                _ => TokenPlan::Prompt(count, PromptMode::Replace),
            };
            let run = ToWorker::Run { plan, rows: Rows::Hidden(rows) };
            let mut buf = Vec::new();
            send(&mut buf, &run).expect("send");
            proptest::prop_assert_eq!(recv::<ToWorker>(&mut buf.as_slice()).expect("recv"), run);
        }
    }
}
