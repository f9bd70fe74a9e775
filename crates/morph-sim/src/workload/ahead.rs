//! A request stream drawn on a second thread, a few chunks ahead of the run that takes it:
//! drawing requests (arrival times, lengths, their random numbers) is about a twentieth of a
//! run at scale, and the run itself keeps one core busy. The requests and their order are the
//! stream's own.

use std::sync::mpsc::sync_channel;
use std::thread::Scope;

use super::SimRequest;

/// Requests handed over at a time (about 64 KiB of them).
const CHUNK: usize = 1024;

/// Chunks drawn and not yet taken, at most: the drawing thread waits beyond them.
const CHUNKS_AHEAD: usize = 4;

/// `requests`, drawn by a thread of `scope` while the caller takes them. The thread ends when
/// the stream does or when the returned iterator is dropped.
pub fn drawn_ahead<'scope, I>(
    scope: &'scope Scope<'scope, '_>,
    requests: I,
) -> impl Iterator<Item = SimRequest> + 'scope
where
    I: Iterator<Item = SimRequest> + Send + 'scope,
{
    let (chunks, taken) = sync_channel::<Vec<SimRequest>>(CHUNKS_AHEAD);
    scope.spawn(move || {
        let mut requests = requests;
        loop {
            let chunk: Vec<SimRequest> = requests.by_ref().take(CHUNK).collect();
            // An empty chunk is the stream's end; a closed channel, a run that stopped taking.
            if chunk.is_empty() || chunks.send(chunk).is_err() {
                break;
            }
        }
    });
    taken.into_iter().flatten()
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
    fn a_run_that_stops_taking_ends_the_drawing_thread() {
        let first = std::thread::scope(|s| drawn_ahead(s, stream(u64::MAX)).next());
        assert_eq!(first.map(|r| r.arrival), Some(Time(0)), "the scope ended: its thread did too");
    }
}
