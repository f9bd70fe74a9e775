//! Morph past one machine, against a real etcd started here (`.ci/run` installs etcd-server):
//! hosts and workers register under leases that expire when their owner freezes and come back
//! with it; a frozen host is found dead by its lease and its batches run again on another host,
//! every call answered once; three network namespaces as three hosts (the server with etcd, two
//! worker hosts) serve a pipeline whose stages span both worker hosts, and one of them killed
//! mid-load (every process SIGKILLed) loses no call. Every cluster shares a token: the agents'
//! workers API refuses a caller without it, and the workers present it to the server. A worker
//! on another host serves the vectors a thread does, int8 and fp32 alike.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use morph_encoder::pooling::cosine;
use morph_fetch::onnxruntime_library;
use morph_fetch::{ModelSource, Pip, fetch, morph_home};
use morph_worker::cluster::lease::Registration;
use morph_worker::cluster::membership::{MemberChange, Membership};
use morph_worker::cluster::{ClusterConfig, WorkerRecord};

/// Embedding calls answered 200, as `/metrics` counts them.
const EMBEDDINGS_ANSWERED: &str = "morph_requests_total{route=\"/v1/embeddings\",status=\"200\"}";

/// A process of the test (etcd, an agent), woken if frozen and stopped when dropped.
struct Proc(Child);

impl Proc {
    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let pid = self.0.id().to_string();
        let _ = Command::new("kill").args(["-CONT", &pid]).status();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        for _ in 0..100 {
            if matches!(self.0.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(30));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A real etcd serving clients on `port` at `ip` (inside `netns`: on every address there,
/// `ip` being the one it advertises), its data in a temporary folder; `reach` is its address
/// as this process reaches it.
struct Etcd {
    url: String,
    _proc: Proc,
    _data: tempfile::TempDir,
}

impl Etcd {
    fn start(netns: Option<&Netns>, ip: &str, port: u16, reach: &str) -> Self {
        let binary =
            ["/usr/bin/etcd", "/usr/local/bin/etcd"].into_iter().find(|p| std::path::Path::new(p).is_file());
        let binary =
            binary.expect("etcd is needed for the cluster tests: apt-get install etcd-server (.ci/run does)");
        let data = tempfile::tempdir().expect("etcd data folder");
        let url = format!("http://{ip}:{port}");
        let (mut cmd, listen) = match netns {
            Some(ns) => (ns.command(binary), format!("http://0.0.0.0:{port}")),
            None => (Command::new(binary), url.clone()),
        };
        cmd.arg("--data-dir")
            .arg(data.path())
            .arg(format!("--listen-client-urls={listen}"))
            .arg(format!("--advertise-client-urls={url}"))
            .arg(format!("--listen-peer-urls=http://127.0.0.1:{}", port + 1))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let proc = Proc(cmd.spawn().expect("starting etcd"));
        let etcd = Etcd { url, _proc: proc, _data: data };
        let client = cluster(&format!("http://{reach}:{port}")).etcd();
        for _ in 0..200 {
            if client.get_prefix("/morph/").is_ok() {
                return etcd;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("etcd at {} did not become healthy", etcd.url);
    }
}

/// A free TCP port on loopback (and the next one, for etcd's peers).
fn free_port() -> u16 {
    loop {
        let port =
            std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        if port < 65_000 && std::net::TcpListener::bind(("127.0.0.1", port + 1)).is_ok() {
            return port;
        }
    }
}

/// The default model's folder and ONNX Runtime, fetched through Morph's own fetch.
fn model() -> (PathBuf, PathBuf) {
    let files = fetch(&ModelSource::Default, &morph_home()).expect("the default model");
    let library = onnxruntime_library(None, &morph_home(), &Pip::from_env()).expect("ONNX Runtime");
    (files.dir, library)
}

/// A host agent named `name` at `advertise`, registered once this returns; fp32 on every host, as
/// the servers below: vectors are compared across hosts.
fn agent(netns: Option<&Netns>, etcd: &str, name: &str, advertise: &str, slots: u16) -> Proc {
    agent_of(netns, etcd, name, advertise, slots, "fp32")
}

/// [`agent`] whose workers run graphs of `dtype`.
fn agent_of(netns: Option<&Netns>, etcd: &str, name: &str, advertise: &str, slots: u16, dtype: &str) -> Proc {
    let (dir, library) = model();
    let morph = env!("CARGO_BIN_EXE_morph");
    let mut cmd = match netns {
        Some(ns) => ns.command(morph),
        None => Command::new(morph),
    };
    cmd.args(["agent", "--etcd", etcd, "--cluster", "test", "--host-name", name])
        .args(["--advertise", advertise, "--slots", &slots.to_string(), "--lease-ttl-s", "2"])
        .arg("--model")
        .arg(dir)
        .arg("--ort-library")
        .arg(library)
        .args(["--dtype", dtype])
        .env("MORPH_CLUSTER_TOKEN", TOKEN)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().expect("starting an agent");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("agent's first line");
    assert!(line.starts_with("morph agent listening on "), "{line:?}");
    Proc(child)
}

fn cluster(etcd: &str) -> ClusterConfig {
    ClusterConfig {
        etcd: etcd.into(),
        cluster: "test".into(),
        lease_ttl: Duration::from_secs(2),
        token: None,
    }
}

/// The secret the hosts of the tests' clusters share (agents and workers from the environment,
/// servers from a file).
const TOKEN: &str = "the-cluster-s3cret";

/// A file holding [`TOKEN`], for a server's --cluster-token-file.
fn token_file() -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().expect("a token file");
    std::io::Write::write_all(&mut file, format!("{TOKEN}\n").as_bytes()).expect("writing the token");
    file
}

fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    for _ in 0..600 {
        if ready() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out waiting for {what}");
}

#[test]
fn registrations_live_as_long_as_their_lease_is_kept_and_a_frozen_host_leaves_and_comes_back() {
    let etcd = Etcd::start(None, "127.0.0.1", free_port(), "127.0.0.1");
    let seen: Arc<Mutex<Vec<MemberChange>>> = Arc::default();
    let log = seen.clone();
    let membership =
        Membership::start(cluster(&etcd.url), Box::new(move |c| log.lock().expect("log").push(c)))
            .expect("watch");
    let changes = || seen.lock().expect("log").clone();

    // A worker's registration outlives several TTLs while kept alive, and goes at once when
    // revoked.
    let config = cluster(&etcd.url);
    let record = WorkerRecord {
        host: "x".into(),
        pid: 7,
        model: "m".into(),
        unit: morph_core::UnitSpec::batch(morph_core::RuntimeSpec::dynamic(64, 4)),
        address: "127.0.0.1".parse().expect("ip"),
        server: "tcp:127.0.0.1:1".into(),
    };
    let registration = Registration::new(
        config.etcd(),
        config.worker_key("x", 7),
        serde_json::to_vec(&record).expect("json"),
        config.lease_ttl,
    )
    .expect("registered");
    wait_for("the worker in the membership", || membership.workers() == vec![record.clone()]);
    std::thread::sleep(3 * config.lease_ttl);
    assert_eq!(membership.workers(), vec![record.clone()], "kept alive past its TTL");
    drop(registration);
    wait_for("the worker gone", || {
        changes().contains(&MemberChange::WorkerGone { host: "x".into(), pid: 7 })
    });
    assert!(membership.workers().is_empty());

    // A host agent joins; frozen, its lease expires and it leaves; thawed, it registers again.
    let host = agent(None, &etcd.url, "a", "127.0.0.1", 1);
    wait_for("host a up", || membership.host("a").is_some());
    let up = |c: &MemberChange| matches!(c, MemberChange::HostUp(h) if h.name == "a");
    assert_eq!(changes().iter().filter(|c| up(c)).count(), 1);
    signal(host.pid(), "STOP");
    wait_for("host a gone", || changes().contains(&MemberChange::HostGone("a".into())));
    assert!(membership.host("a").is_none());
    signal(host.pid(), "CONT");
    wait_for("host a back", || changes().iter().filter(|c| up(c)).count() == 2);
    let order: Vec<MemberChange> =
        changes().into_iter().filter(|c| !matches!(c, MemberChange::WorkerGone { .. })).collect();
    assert!(
        matches!(
            order.as_slice(),
            [MemberChange::HostUp(_), MemberChange::HostGone(_), MemberChange::HostUp(_)]
        ),
        "up, gone, up again: {order:?}"
    );
}

/// Instances of the server by host: (host, pid).
async fn instances_by_host(url: &str) -> Vec<(String, u32)> {
    let info = get_json(url, "/info").await;
    let instances = info["workers"]["instances"].as_array().cloned().unwrap_or_default();
    instances
        .iter()
        .map(|w| (w["host"].as_str().unwrap_or("").to_string(), w["pid"].as_u64().unwrap_or(0) as u32))
        .collect()
}

/// The cluster's hosts in `/info`: (name, slots, up).
async fn hosts(url: &str) -> Vec<(String, u64, bool)> {
    let info = get_json(url, "/info").await;
    let hosts = info["workers"]["cluster"]["hosts"].as_array().cloned().unwrap_or_default();
    hosts
        .iter()
        .map(|h| (h["name"].as_str().unwrap_or("").into(), h["slots"].as_u64().unwrap_or(0), h["up"] == true))
        .collect()
}

/// Sends `calls` calls of [`TEXTS`] at once; every one must be answered 200 with `expected`.
async fn burst(url: &str, calls: usize, expected: &[Vec<f32>]) {
    let sent: Vec<_> = (0..calls)
        .map(|_| {
            let url = url.to_string();
            tokio::spawn(async move { embed(&url, &TEXTS).await })
        })
        .collect();
    for call in sent {
        let (status, body) = call.await.expect("call task");
        assert_eq!(status, 200, "{body}");
        for (a, b) in vectors(&body).iter().zip(expected) {
            assert!(cosine(a, b) >= 0.9999, "cosine {}", cosine(a, b));
        }
    }
}

/// The vectors of [`TEXTS`] served by `morph serve` with `args`.
async fn served_vectors(args: &[&str]) -> Vec<Vec<f32>> {
    let served = serve_with(args);
    let (status, body) = embed(&served.url, &TEXTS).await;
    assert_eq!(status, 200, "{body}");
    vectors(&body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_on_another_host_serves_the_vectors_of_a_thread_in_each_dtype() {
    let (dir, library) = model();
    let (dir, library) = (dir.display().to_string(), library.display().to_string());
    let model = ["--model", &dir, "--ort-library", &library, "--engine", "ort", "--runtime", "dynamic:64x4"];
    let mut remote_by_dtype = Vec::new();
    for dtype in ["int8", "fp32"] {
        let etcd = Etcd::start(None, "127.0.0.1", free_port(), "127.0.0.1");
        let _a = agent_of(None, &etcd.url, "a", "127.0.0.1", 1, dtype);
        let token = token_file();
        let token_path = token.path().display().to_string();
        let cluster = ["--cluster-token-file", &token_path, "--etcd", &etcd.url, "--cluster", "test"];
        let hosts = ["--advertise", "127.0.0.1", "--hosts", "1", "--lease-ttl-s", "2"];
        let remote =
            serve_with(&[&model[..], &["--dtype", dtype, "--threads", "1"], &cluster, &hosts].concat());
        let placed = instances_by_host(&remote.url).await;
        assert_eq!(placed.iter().map(|(h, _)| h.as_str()).collect::<Vec<_>>(), ["a"], "{placed:?}");
        let (status, body) = embed(&remote.url, &TEXTS).await;
        assert_eq!(status, 200, "{body}");
        let on_host_a = vectors(&body);
        drop(remote);
        let threads =
            served_vectors(&[&model[..], &["--dtype", dtype, "--workers", "thread"]].concat()).await;
        for (i, (a, b)) in on_host_a.iter().zip(&threads).enumerate() {
            assert!(
                cosine(a, b) >= 0.99999,
                "{dtype}, text {i}: host a vs a thread, cosine {}",
                cosine(a, b)
            );
        }
        remote_by_dtype.push(on_host_a);
    }
    let least =
        remote_by_dtype[0].iter().zip(&remote_by_dtype[1]).map(|(a, b)| cosine(a, b)).fold(1.0, f32::min);
    assert!(least < 0.99999, "the agent ran int8 graphs for int8 (least cosine to fp32 {least})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_host_is_found_dead_by_its_lease_and_its_batch_runs_again_on_another_host() {
    let etcd = Etcd::start(None, "127.0.0.1", free_port(), "127.0.0.1");
    let _a = agent(None, &etcd.url, "a", "127.0.0.1", 1);
    let b = agent(None, &etcd.url, "b", "127.0.0.1", 1);
    let (dir, library) = model();
    let (dir, library) = (dir.display().to_string(), library.display().to_string());
    // A batch timeout far beyond the test: only the lease can find the frozen host dead.
    let token = token_file();
    let token_path = token.path().display().to_string();
    let served = serve_with(&[
        "--cluster-token-file",
        &token_path,
        "--model",
        &dir,
        "--ort-library",
        &library,
        "--engine",
        "ort",
        "--dtype",
        "fp32",
        "--runtime",
        "dynamic:64x4",
        "--instances",
        "2",
        "--threads",
        "1",
        "--etcd",
        &etcd.url,
        "--cluster",
        "test",
        "--advertise",
        "127.0.0.1",
        "--hosts",
        "2",
        "--lease-ttl-s",
        "2",
        "--worker-batch-timeout-s",
        "600",
    ]);
    let placed = instances_by_host(&served.url).await;
    let mut names: Vec<&str> = placed.iter().map(|(h, _)| h.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["a", "b"], "one replica on each host: {placed:?}");
    let (status, body) = embed(&served.url, &TEXTS).await;
    assert_eq!(status, 200, "{body}");
    let expected = vectors(&body);
    let info = get_json(&served.url, "/info").await;
    for host in info["workers"]["cluster"]["hosts"].as_array().expect("hosts") {
        let agent = host["agent"].as_str().expect("the agent's address");
        let health = reqwest::get(format!("{agent}/health")).await.expect("the agent answers");
        assert_eq!(health.status(), 200, "{agent}/health, the agent's probe");
        // The workers' API answers only whoever presents the cluster's token.
        let anyone =
            reqwest::Client::new().get(format!("{agent}/v1/workers")).send().await.expect("an answer");
        assert_eq!(anyone.status(), 401, "{agent}/v1/workers without the token");
        let member =
            reqwest::Client::new().get(format!("{agent}/v1/workers")).bearer_auth(TOKEN).send().await;
        assert_eq!(member.expect("an answer").status(), 200, "{agent}/v1/workers with the token");
    }

    let frozen = placed.iter().find(|(h, _)| h == "b").expect("b's replica").1;
    signal(b.pid(), "STOP");
    signal(frozen, "STOP");
    // Bursts until one batch has gone to the frozen replica, been cut off and run again.
    for _ in 0..20 {
        burst(&served.url, 6, &expected).await;
        if metric(&served.url, "morph_workers_lost_total").await >= 1.0 {
            break;
        }
    }
    assert_eq!(metric(&served.url, "morph_workers_lost_total").await, 1.0, "the frozen replica is lost once");
    until("host b down in /info", async || hosts(&served.url).await.contains(&("b".into(), 0, false))).await;
    assert_eq!(metric(&served.url, "morph_cluster_host_up{host=\"b\"}").await, 0.0);
    assert_eq!(metric(&served.url, "morph_cluster_host_slots{host=\"a\"}").await, 1.0);
    burst(&served.url, 6, &expected).await;

    // Thawed, the host registers again (its slot back for the policy); the cut-off worker sees
    // its connection closed and exits, never answering the batch that ran elsewhere.
    signal(b.pid(), "CONT");
    signal(frozen, "CONT");
    until("host b back", async || hosts(&served.url).await.contains(&("b".into(), 1, true))).await;
    until("the cut-off worker exits", async || !std::path::Path::new(&format!("/proc/{frozen}")).exists())
        .await;
    let answered = metric(&served.url, EMBEDDINGS_ANSWERED).await;
    let (status, _) = embed(&served.url, &TEXTS).await;
    assert_eq!(status, 200);
    assert_eq!(metric(&served.url, EMBEDDINGS_ANSWERED).await, answered + 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_hosts_serve_a_pipeline_across_two_and_one_killed_mid_load_loses_no_call() {
    let tag = std::process::id() % 100_000;
    // Namespaces need root (CI runs as root); elsewhere this says so and fails, unless told
    // to skip with MORPH_SKIP_NETNS=1.
    let server_ns = match Netns::try_new(&format!("morphs{tag}")) {
        Ok(ns) => ns,
        Err(e) if std::env::var_os("MORPH_SKIP_NETNS").is_some() => {
            eprintln!("SKIPPED (MORPH_SKIP_NETNS): network namespaces cannot be made here: {e}");
            return;
        }
        Err(e) => panic!(
            "network namespaces cannot be made here ({e}); run as root, or set MORPH_SKIP_NETNS=1 to skip"
        ),
    };
    let h1 = Netns::try_new(&format!("morph1h{tag}")).expect("host 1");
    let h2 = Netns::try_new(&format!("morph2h{tag}")).expect("host 2");
    // The server's host links to each worker host; this process reaches it over its own link.
    let (srv_ip, client_ip) = ("10.232.1.1", "10.232.1.2");
    let (srv_h1, h1_ip, srv_h2, h2_ip) = ("10.232.2.1", "10.232.2.2", "10.232.3.1", "10.232.3.2");
    server_ns.link_here(client_ip, srv_ip);
    server_ns.link(srv_h1, &h1, h1_ip);
    server_ns.link(srv_h2, &h2, h2_ip);
    h1.default_route(srv_h1);
    h2.default_route(srv_h2);

    // etcd and the server live on the server's host, at its address on host 1's link (host 2
    // reaches it through its default route).
    let etcd = Etcd::start(Some(&server_ns), srv_h1, 2379, srv_ip);
    let _a1 = agent(Some(&h1), &etcd.url, "h1", h1_ip, 2);
    let a2 = agent(Some(&h2), &etcd.url, "h2", h2_ip, 2);
    let (dir, library) = model();
    let mut cmd = server_ns.command(env!("CARGO_BIN_EXE_morph"));
    cmd.env("MORPH_CLUSTER_TOKEN", TOKEN);
    cmd.args(["serve", "--host", "0.0.0.0", "--port", "8080", "--model"])
        .arg(&dir)
        .arg("--ort-library")
        .arg(&library);
    cmd.args([
        "--engine",
        "ort",
        "--dtype",
        "fp32",
        "--runtime",
        "dynamic:128x8",
        "--stages",
        "2",
        "--instances",
        "2",
        "--threads",
        "1",
    ]);
    cmd.args([
        "--etcd",
        &etcd.url,
        "--cluster",
        "test",
        "--advertise",
        srv_h1,
        "--hosts",
        "2",
        "--lease-ttl-s",
        "2",
    ]);
    let mut served = Served::start(cmd);
    served.url = format!("http://{srv_ip}:8080");

    let info = get_json(&served.url, "/info").await;
    let instances = info["workers"]["instances"].as_array().cloned().unwrap_or_default();
    let stages_on = |host: &str| -> Vec<String> {
        instances
            .iter()
            .filter(|w| w["host"] == host)
            .map(|w| w["unit"].as_str().unwrap_or("").to_string())
            .collect()
    };
    for host in ["h1", "h2"] {
        let units = stages_on(host);
        assert!(
            units.iter().any(|u| u.contains("stage0of2")) && units.iter().any(|u| u.contains("stage1of2")),
            "{host} runs both stages: {info}"
        );
    }

    // Vectors across hosts equal one whole model's on this host.
    // fp32, as the hosts' worker processes run here.
    let whole = serve(&["--stages", "1", "--workers", "thread", "--dtype", "fp32"]);
    let (status, body) = embed(&whole.url, &TEXTS).await;
    assert_eq!(status, 200, "{body}");
    let expected = vectors(&body);
    drop(whole);
    let (status, body) = embed(&served.url, &TEXTS).await;
    assert_eq!(status, 200, "{body}");
    for (a, b) in vectors(&body).iter().zip(&expected) {
        assert!(cosine(a, b) >= 0.9999, "pipeline across hosts vs whole: cosine {}", cosine(a, b));
    }

    // Load; host 2 killed (every process SIGKILLed) while it runs.
    let before = metric(&served.url, EMBEDDINGS_ANSWERED).await;
    let calls = 90;
    let sent: Vec<_> = (0..calls)
        .map(|i| {
            let url = served.url.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(25 * i)).await;
                embed(&url, &TEXTS).await
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(700)).await;
    let killed = h2.pids();
    assert!(killed.contains(&a2.pid()), "host 2's agent runs in its namespace");
    for pid in &killed {
        let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
    }
    let mut answered = 0;
    for call in sent {
        let (status, body) = call.await.expect("call task");
        assert_eq!(status, 200, "every call is answered: {body}");
        for (a, b) in vectors(&body).iter().zip(&expected) {
            assert!(cosine(a, b) >= 0.9999);
        }
        answered += 1;
    }
    assert_eq!(answered, calls);
    assert_eq!(
        metric(&served.url, EMBEDDINGS_ANSWERED).await,
        before + calls as f64,
        "each call counted once"
    );
    assert!(metric(&served.url, "morph_workers_lost_total").await >= 1.0, "host 2's replicas were lost");
    until("host 2 down in /info", async || hosts(&served.url).await.contains(&("h2".into(), 0, false))).await;
    let (status, body) = embed(&served.url, &TEXTS).await;
    assert_eq!(status, 200, "host 1 serves on: {body}");
    drop(served);
    drop(a2);
}
