//! The worker handshake refuses, in one clear line, a worker of another protocol version and a
//! worker without the cluster's token; a worker with it gets through to its engine's report.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use morph_core::RuntimeSpec;
use morph_engine::Engine;
use morph_worker::remote::{Endpoint, Listener, RemoteEngine};
use morph_worker::wire::{self, Boot, FromWorker, PROTOCOL};

/// The server's side of one handshake with a worker that writes `greeting` and says hello
/// with `token`, then reports its engine up.
fn handshake(greeting: &[u8], token: Option<&str>) -> Result<RemoteEngine, String> {
    let loopback = Endpoint::Tcp(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0));
    let listener = Listener::bind(&loopback).expect("listening on loopback");
    let endpoint = listener.endpoint().expect("the listener's address");
    let (greeting, token) = (greeting.to_vec(), token.map(str::to_string));
    let worker = std::thread::spawn(move || {
        let mut stream = endpoint.connect().expect("connecting");
        stream.write_all(&greeting).expect("greeting");
        // The server's greeting, then this worker's hello and report (a refused one finds
        // the connection closed: whatever it writes then is lost).
        let _ = wire::check_greeting(&mut stream, "the server");
        let _ = wire::send(&mut stream, &FromWorker::Hello { token });
        let boot = Boot {
            pid: 7,
            dim: 4,
            prepared: false,
            times: Default::default(),
            first_batch: Duration::ZERO,
            packs: true,
        };
        let _ = wire::send(&mut stream, &FromWorker::Ready(boot));
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    let accepted = RemoteEngine::accept(
        &listener,
        None,
        RuntimeSpec::dynamic(8, 1),
        deadline,
        Duration::from_secs(5),
        Some("s3cret"),
    );
    worker.join().expect("the worker thread");
    accepted.map_err(|e| e.to_string())
}

fn greeting(version: u32) -> Vec<u8> {
    [b"MORPH".as_slice(), &version.to_le_bytes()].concat()
}

#[test]
fn a_worker_of_another_protocol_or_without_the_token_is_refused_by_name() {
    let ok = handshake(&greeting(PROTOCOL), Some("s3cret")).expect("the right protocol and token");
    assert_eq!(ok.pid(), 7);
    // Its engine removes the padding, as its report said: under the plain plan, not a merging one.
    assert!(ok.packs(morph_core::TokenPlan::Plain) && !ok.packs(morph_core::TokenPlan::Merge(2)));
    let other = handshake(&greeting(PROTOCOL + 1), Some("s3cret")).unwrap_err();
    let said = format!("the worker speaks Morph's worker protocol {}, this process {PROTOCOL}", PROTOCOL + 1);
    assert!(other.contains(&said), "{other}");
    let old = handshake(&[0, 0, 0, 9, 1, 2, 3, 4, 5], Some("s3cret")).unwrap_err();
    assert!(old.contains("does not speak Morph's worker protocol"), "{old}");
    for token in [None, Some("wrong")] {
        let refused = handshake(&greeting(PROTOCOL), token).unwrap_err();
        assert!(refused.contains("did not present this cluster's token"), "{refused}");
    }
}
