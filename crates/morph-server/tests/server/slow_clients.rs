//! Slow and stalled clients cannot hold the server: a half-sent head is cut off, a stalled body
//! gets a JSON 408, connections beyond the cap wait to be accepted, and shutdown completes at
//! its drain deadline even with a stalled client. The `timeout`s here only stop a broken build
//! from hanging the suite; what is asserted is what happened, not how fast.

use crate::common;

use std::time::Duration;

use common::{emulated, start};
use morph_core::RuntimeSpec;
use morph_server::{ConnectionLimits, Deployment};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const GUARD: Duration = Duration::from_secs(30);

fn limited(max_connections: usize) -> Deployment {
    let limits = ConnectionLimits {
        header_timeout: Duration::from_millis(500),
        body_timeout: Duration::from_millis(500),
        max_connections,
        drain_timeout: Duration::from_millis(500),
    };
    Deployment { limits, ..emulated(1.0, RuntimeSpec::dynamic(64, 4), 16) }
}

async fn connect(url: &str) -> TcpStream {
    TcpStream::connect(url.trim_start_matches("http://")).await.expect("connect")
}

/// Everything the server sends until it closes the connection.
async fn read_to_close(stream: &mut TcpStream) -> String {
    let mut out = Vec::new();
    tokio::time::timeout(GUARD, stream.read_to_end(&mut out)).await.expect("the server closed it").ok();
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn a_half_sent_head_is_cut_off_and_a_stalled_body_gets_408() {
    let server = start(limited(8)).await;
    let mut half = connect(&server.url).await;
    half.write_all(b"POST /embed HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    assert_eq!(read_to_close(&mut half).await, "", "closed without an answer");

    let mut stalled = connect(&server.url).await;
    let head =
        "POST /embed HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n";
    stalled.write_all(head.as_bytes()).await.unwrap();
    stalled.write_all(br#"{"inputs":"#).await.unwrap();
    let reply = read_to_close(&mut stalled).await;
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    assert!(reply.contains("body_timeout") && reply.contains("did not arrive within 0.5 s"), "{reply}");
    let metrics =
        common::client().get(format!("{}/metrics", server.url)).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("morph_request_failures_total{kind=\"body_timeout\"} 1"), "{metrics}");
    server.stop().await;
}

#[tokio::test]
async fn connections_past_the_cap_wait_and_shutdown_ends_at_its_drain_deadline() {
    let mut server = start(limited(1)).await;
    // One connection holds the only place with a request that never finishes its body; a
    // second client is accepted only once that connection has closed (after its 408).
    let mut holder = connect(&server.url).await;
    // A whole call first proves the holder was accepted (it keeps its connection alive).
    holder.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains(r#"{"status":"ok"}"#) {
        let mut buf = [0u8; 512];
        let n = tokio::time::timeout(GUARD, holder.read(&mut buf)).await.expect("health").unwrap();
        assert!(n > 0, "closed early");
        seen.extend_from_slice(&buf[..n]);
    }
    holder.write_all(b"POST /embed HTTP/1.1\r\nHost: x\r\ncontent-length: 100\r\n\r\n{").await.unwrap();
    let (order_tx, mut order) = tokio::sync::mpsc::unbounded_channel();
    let tx = order_tx.clone();
    let held = tokio::spawn(async move {
        let reply = read_to_close(&mut holder).await;
        let _ = tx.send("holder closed");
        reply
    });
    let url = server.url.clone();
    let waiting = tokio::spawn(async move {
        let reply = common::post(&url, "/embed", r#"{"inputs": "hi"}"#).await;
        let _ = order_tx.send("second served");
        reply
    });
    let (status, _) = tokio::time::timeout(GUARD, waiting).await.expect("served in the end").unwrap();
    assert_eq!(status, 200);
    assert!(held.await.unwrap().starts_with("HTTP/1.1 408"));
    assert_eq!(order.recv().await, Some("holder closed"));
    assert_eq!(order.recv().await, Some("second served"));

    // A stalled client cannot keep shutdown from completing.
    let mut stalled = connect(&server.url).await;
    stalled.write_all(b"POST /embed HTTP/1.1\r\nHost: x\r\ncontent-length: 100\r\n\r\n{").await.unwrap();
    server.begin_shutdown();
    let join = server.join.take().expect("server task");
    tokio::time::timeout(GUARD, join).await.expect("shutdown completed").unwrap().unwrap();
}
