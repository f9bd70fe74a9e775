//! A request stream drawn on a second thread, a few chunks ahead of the run that takes it:
//! drawing requests (arrival times, lengths, their random numbers) is about a twentieth of a
//! run at scale, and the run itself keeps one core busy. The requests and their order are the
//! stream's own. The same thread can deal the stream to several runs in turn (a partitioned
//! run's servers, [`crate::partitions`]).

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::Scope;

use super::SimRequest;

/// Requests handed over at a time (about 64 KiB of them).
const CHUNK: usize = 1024;

/// Chunks drawn and not yet taken, at most: the drawing thread waits beyond them.
const CHUNKS_AHEAD: usize = 4;

/// Requests handed over together.
type Chunk = Vec<SimRequest>;

/// One taker's share of a stream drawn ahead.
pub type Dealt = std::iter::Flatten<std::sync::mpsc::IntoIter<Chunk>>;

/// `requests`, drawn by a thread of `scope` while the caller takes them. The thread ends when
/// the stream does or when the returned iterator is dropped.
pub fn drawn_ahead<'scope, I>(scope: &'scope Scope<'scope, '_>, requests: I) -> Dealt
where
    I: Iterator<Item = SimRequest> + Send + 'scope,
{
    dealt_ahead(scope, requests, 1).pop().expect("one share")
}

/// `requests` dealt in turn to `n` takers (request i to taker i mod n), drawn by a thread of
/// `scope` while they take them. The thread ends when the stream does or when a taker is
/// dropped (a run that stopped: the others' streams end there too).
pub fn dealt_ahead<'scope, I>(scope: &'scope Scope<'scope, '_>, requests: I, n: usize) -> Vec<Dealt>
where
    I: Iterator<Item = SimRequest> + Send + 'scope,
{
    let (hands, shares): (Vec<SyncSender<Chunk>>, Vec<Receiver<Chunk>>) =
        (0..n).map(|_| sync_channel(CHUNKS_AHEAD)).unzip();
    scope.spawn(move || {
        let mut chunks: Vec<Chunk> = vec![Vec::with_capacity(CHUNK); n];
        for (i, request) in requests.enumerate() {
            let k = i % n;
            chunks[k].push(request);
            if chunks[k].len() == CHUNK {
                let full = std::mem::replace(&mut chunks[k], Vec::with_capacity(CHUNK));
                if hands[k].send(full).is_err() {
                    return;
                }
            }
        }
        for (hand, chunk) in hands.iter().zip(chunks) {
            if !chunk.is_empty() && hand.send(chunk).is_err() {
                return;
            }
        }
    });
    shares.into_iter().map(|share| share.into_iter().flatten()).collect()
}

#[cfg(test)]
mod tests {
    use morph_core::Time;

    use super::*;

    fn stream(n: u64) -> impl Iterator<Item = SimRequest> + Send {
        (0..n).map(|i| SimRequest::new(Time(i), (i % 97) as u32 + 1, 0))
    }

    #[test]
    fn the_stream_comes_whole_and_in_order() {
        let n = 3 * CHUNK as u64 + 5;
        let ahead: Vec<SimRequest> = std::thread::scope(|s| drawn_ahead(s, stream(n)).collect());
        assert_eq!(ahead, stream(n).collect::<Vec<_>>());
    }

    #[test]
    fn each_taker_gets_every_nth_request_in_order() {
        let n = 3 * CHUNK as u64 + 5;
        let shares: Vec<Vec<SimRequest>> =
            std::thread::scope(|s| dealt_ahead(s, stream(n), 3).into_iter().map(Iterator::collect).collect());
        for (k, share) in shares.iter().enumerate() {
            let expected: Vec<SimRequest> = stream(n).skip(k).step_by(3).collect();
            assert_eq!(share, &expected, "taker {k}");
        }
    }

    #[test]
    fn a_run_that_stops_taking_ends_the_drawing_thread() {
        let first = std::thread::scope(|s| drawn_ahead(s, stream(u64::MAX)).next());
        assert_eq!(first.map(|r| r.arrival), Some(Time(0)), "the scope ended: its thread did too");
    }
}
