//! The cost of one hop between pipeline stages on Morph's framed transport, against payload
//! size: a batch's hidden states (rows × tokens × 384 floats) sent to a peer that answers with
//! them (a `Run` out, a `Done` back, as a stage hand-off is), over a Unix socket and over TCP
//! on loopback, the peer a thread of this process (the same system calls as a worker process,
//! without the engine). Median of `--runs` round trips, halved: one hop.
//!
//! `cargo bench -p morph-benches --bench wire_hop [-- --runs N]`

use std::time::Instant;

use morph_benches::cli_arg;
use morph_core::TokenPlan;
use morph_engine::timing::median;
use morph_engine::{EngineError, Rows};
use morph_worker::remote::{Endpoint, Listener, Stream};
use morph_worker::wire::{self, FromWorker, ToWorker};

const HIDDEN: usize = 384;

/// Answers every `Run` with its rows until the stream closes.
fn echo(mut stream: Stream) {
    while let Ok(ToWorker::Run { rows, .. }) = wire::recv::<ToWorker>(&mut stream) {
        let Rows::Hidden(rows) = rows else { return };
        if wire::send(&mut stream, &FromWorker::Done(Ok::<_, EngineError>(rows))).is_err() {
            return;
        }
    }
}

/// Median ms of one hop carrying `rows × tokens` hidden states to the peer at `endpoint`.
fn hop_ms(listener: &Listener, rows: usize, tokens: usize, runs: usize) -> f64 {
    let endpoint = listener.endpoint().expect("endpoint");
    let peer = std::thread::spawn(move || echo(endpoint.connect().expect("connect")));
    let deadline = Instant::now() + std::time::Duration::from_secs(10);
    let mut stream = listener.accept(deadline, || None).expect("accept");
    let batch = Rows::Hidden(vec![vec![0.5f32; tokens * HIDDEN]; rows]);
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs + 2 {
        let started = Instant::now();
        wire::send(&mut stream, &ToWorker::Run { plan: TokenPlan::Plain, rows: batch.clone() })
            .expect("send");
        let FromWorker::Done(Ok(back)) = wire::recv::<FromWorker>(&mut stream).expect("recv") else {
            panic!("the peer answered something else")
        };
        assert_eq!(back.len(), rows);
        times.push(started.elapsed().as_secs_f64() * 1e3 / 2.0);
    }
    drop(stream);
    peer.join().expect("peer");
    median(times[2..].to_vec())
}

fn main() {
    let runs: usize = cli_arg("--runs", 30);
    let dir = tempfile::tempdir().expect("tmp");
    let unix = Listener::bind(&Endpoint::Unix(dir.path().join("hop.sock"))).expect("unix listener");
    let tcp = Listener::bind(&"tcp:127.0.0.1:0".parse().expect("addr")).expect("tcp listener");
    println!("one stage hop on the framed transport: median of {runs} round trips / 2 (ms)");
    println!(
        "{:>6} {:>7} {:>10} {:>9} {:>9} {:>9} {:>10}",
        "rows", "tokens", "payload", "unix", "tcp", "tcp/unix", "unix GB/s"
    );
    for (rows, tokens) in [(1, 8), (1, 32), (1, 128), (8, 128), (32, 128), (32, 512)] {
        let bytes = (rows * tokens * HIDDEN * 4) as f64;
        let u = hop_ms(&unix, rows, tokens, runs);
        let t = hop_ms(&tcp, rows, tokens, runs);
        let payload =
            if bytes < 1e6 { format!("{:.0} KB", bytes / 1e3) } else { format!("{:.1} MB", bytes / 1e6) };
        let rate = bytes / (u / 1e3) / 1e9;
        println!("{rows:>6} {tokens:>7} {payload:>10} {u:>9.3} {t:>9.3} {:>9.2} {rate:>10.2}", t / u);
    }
}
