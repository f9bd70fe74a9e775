//! A server that listens before it can serve (`Server::serve_once_built`): while its build runs,
//! real HTTP calls get the start's step (readiness 503 with the reason, other routes a 503 of
//! type `starting` with Retry-After, liveness 200); once built, the same port serves; a shutdown
//! during the start returns without waiting for the build; a failed build is the error returned, the port closed.

use crate::common;

use std::sync::mpsc;

use morph_core::RuntimeSpec;
use morph_server::{Server, StartupSteps};
use tokio::sync::oneshot;

use common::{client, emulated, post};

const STEP: &str = "profiling 1 x 2 thread(s): 3/8";

/// Binds a free port; the listener and its URL.
async fn listen() -> (tokio::net::TcpListener, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("the starting server");
    let url = format!("http://{}", listener.local_addr().expect("the starting server"));
    (listener, url)
}

/// GET `path`: the status and the JSON body.
async fn get(url: &str, path: &str) -> (u16, serde_json::Value) {
    let resp = client().get(format!("{url}{path}")).send().await.expect("the starting server");
    (resp.status().as_u16(), resp.json().await.unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_port_answers_with_the_start_step_until_the_server_is_built_then_serves() {
    let (listener, url) = listen().await;
    let steps = StartupSteps::default();
    let build_steps = steps.clone();
    let (go, wait) = mpsc::channel::<()>();
    let (shutdown, stopped) = oneshot::channel::<()>();
    let (serving_tx, serving) = oneshot::channel();
    let config = emulated(1.0, RuntimeSpec::dynamic(128, 4), 64);
    let join = tokio::spawn(Server::serve_once_built(
        listener,
        Default::default(),
        async move {
            let _ = stopped.await;
        },
        steps,
        move |drain| -> anyhow::Result<Server> {
            build_steps.step(STEP);
            wait.recv()?;
            Ok(Server::build_draining(config, drain)?)
        },
        move |_| {
            let _ = serving_tx.send(());
        },
    ));

    // The step is published from the build's thread: poll until /ready names it.
    let mut ready = get(&url, "/ready").await;
    for _ in 0..1000 {
        if ready.1["reason"] == STEP {
            break;
        }
        tokio::task::yield_now().await;
        ready = get(&url, "/ready").await;
    }
    assert_eq!(ready, (503, serde_json::json!({ "status": "starting", "reason": STEP })));
    assert_eq!(get(&url, "/health").await.0, 503);
    assert_eq!(get(&url, "/live").await, (200, serde_json::json!({ "status": "ok" })));
    let resp = client()
        .post(format!("{url}/v1/embeddings"))
        .header("content-type", "application/json")
        .body(r#"{"input": "hi"}"#)
        .send()
        .await
        .expect("the starting server");
    assert_eq!(resp.status().as_u16(), 503);
    assert_eq!(resp.headers()["retry-after"], "1");
    let body: serde_json::Value = resp.json().await.expect("the starting server");
    assert_eq!(body["error"]["type"], "starting");
    assert!(body["error"]["message"].as_str().expect("the starting server").contains(STEP), "{body}");

    go.send(()).expect("the starting server");
    serving.await.expect("the starting server");
    assert_eq!(get(&url, "/ready").await, (200, serde_json::json!({ "status": "ok" })));
    let (status, body) = post(&url, "/v1/embeddings", r#"{"input": "hi"}"#).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"][0]["embedding"].as_array().expect("the starting server").len(), 8);
    shutdown.send(()).expect("the starting server");
    join.await.expect("the starting server").expect("the starting server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_while_starting_returns_without_waiting_for_the_build() {
    let (listener, url) = listen().await;
    let (go, wait) = mpsc::channel::<()>();
    let (shutdown, stopped) = oneshot::channel::<()>();
    let join = tokio::spawn(Server::serve_once_built(
        listener,
        Default::default(),
        async move {
            let _ = stopped.await;
        },
        StartupSteps::default(),
        move |_| -> anyhow::Result<Server> {
            // Held until the test ends: the build outlives the server.
            let _ = wait.recv();
            anyhow::bail!("released")
        },
        |_| panic!("never serving"),
    ));
    assert_eq!(get(&url, "/ready").await.0, 503);
    shutdown.send(()).expect("the starting server");
    join.await.expect("the starting server").expect("the starting server");
    assert!(client().get(format!("{url}/ready")).send().await.is_err(), "the port is closed");
    drop(go);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_build_is_the_error_returned_and_the_port_closed() {
    let (listener, url) = listen().await;
    let served = Server::serve_once_built(
        listener,
        Default::default(),
        std::future::pending(),
        StartupSteps::default(),
        |_| -> anyhow::Result<Server> { anyhow::bail!("no such model") },
        |_| panic!("never serving"),
    )
    .await;
    assert_eq!(served.expect_err("an error").to_string(), "no such model");
    assert!(client().get(format!("{url}/ready")).send().await.is_err(), "the port is closed");
}
