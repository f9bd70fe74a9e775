//! What the end-to-end tests of `morph` processes share: a server child, HTTP calls, signals,
//! waiting, and network namespaces standing in for hosts.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

pub(crate) mod tiny;

/// A `morph serve` child, killed when dropped.
pub(crate) struct Served {
    pub(crate) child: Child,
    pub(crate) url: String,
}

impl Drop for Served {
    /// SIGTERM: the server stops its workers and empties its host cache.
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let _ = self.child.wait();
    }
}

/// An encoder server on ONNX Runtime with `flags`.
pub(crate) fn serve(flags: &[&str]) -> Served {
    serve_with(&[&["--engine", "ort", "--runtime", "dynamic:128x4"], flags].concat())
}

pub(crate) fn serve_with(args: &[&str]) -> Served {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_morph"));
    cmd.args(["serve", "--port", "0"]).args(args);
    Served::start(cmd)
}

impl Served {
    /// Runs `cmd` (a `morph serve`) and waits for the address it prints once it serves; should
    /// it stop first, the panic shows how it exited and the last lines of its log (stderr).
    /// Backtraces are off in the child: their frames would push the error out of the lines kept.
    pub(crate) fn start(mut cmd: Command) -> Served {
        cmd.env("RUST_BACKTRACE", "0").env("RUST_LIB_BACKTRACE", "0");
        let mut child =
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("starting morph serve");
        let log = LogTail::drain(child.stderr.take().expect("stderr"));
        Self::await_address(child, Some(log))
    }

    /// As [`Self::start`], its log (stderr) where `cmd` sends it.
    pub(crate) fn start_logged(mut cmd: Command) -> Served {
        let child = cmd.stdout(Stdio::piped()).spawn().expect("starting morph serve");
        Self::await_address(child, None)
    }

    /// The child once it prints its address; else it is stopped, and the panic says how it
    /// ended, with `log`'s lines where it was kept.
    fn await_address(mut child: Child, log: Option<LogTail>) -> Served {
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("stdout line");
        if let Some(url) = line.trim().strip_prefix("morph listening on ") {
            return Served { child, url: url.to_string() };
        }
        let _ = child.kill();
        let status = child.wait().expect("the child's exit status");
        let log = log.map_or_else(|| "(its log went where the command sent it)".to_string(), LogTail::lines);
        panic!(
            "morph serve printed {line:?} instead of its address and ended: {status}; its log ends:\n{log}"
        )
    }
}

/// The last lines a child writes to a pipe, read by a thread for the child's whole life so that
/// the pipe never fills and blocks it.
struct LogTail {
    lines: Arc<Mutex<VecDeque<String>>>,
    reader: std::thread::JoinHandle<()>,
}

impl LogTail {
    const KEPT: usize = 40;
    /// How long the lines are awaited once the child has ended: its worker processes, which
    /// write to the same pipe, may keep it open after it.
    const SETTLE: Duration = Duration::from_secs(2);

    fn drain(pipe: impl std::io::Read + Send + 'static) -> LogTail {
        let lines = Arc::new(Mutex::new(VecDeque::with_capacity(Self::KEPT)));
        let kept = Arc::clone(&lines);
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut tail = kept.lock().expect("log lines");
                if tail.len() == Self::KEPT {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
        });
        LogTail { lines, reader }
    }

    /// The kept lines, once the pipe is closed or [`Self::SETTLE`] has passed.
    fn lines(self) -> String {
        let settled = std::time::Instant::now() + Self::SETTLE;
        while !self.reader.is_finished() && std::time::Instant::now() < settled {
            std::thread::sleep(Duration::from_millis(50));
        }
        Vec::from(self.lines.lock().expect("log lines").clone()).join("\n")
    }
}

/// A small latency profile of the encoder at `model` on ONNX Runtime (lengths `lens`, batches 1
/// and 2), measured by `morph profile` into `out`: what Arlo plans a new model with.
pub(crate) fn quick_profile(model: &str, lens: &str, out: &std::path::Path) {
    let measured = Command::new(env!("CARGO_BIN_EXE_morph"))
        .args(["profile", "--model", model, "--engine", "ort", "--lens", lens, "--batches", "1,2"])
        .args(["--warmup", "1", "--runs", "2", "--out"])
        .arg(out)
        .output()
        .expect("morph profile");
    assert!(measured.status.success(), "{}", String::from_utf8_lossy(&measured.stderr));
}

pub(crate) const TEXTS: [&str; 3] = [
    "A man is eating food.",
    "The quick brown fox jumps over the lazy dog, again and again, all afternoon.",
    "Stages hand hidden states on, process to process.",
];

pub(crate) async fn embed(url: &str, texts: &[&str]) -> (u16, Value) {
    post(url, "/v1/embeddings", json!({ "input": texts })).await
}

/// `body` posted to `path`: the status and the JSON answer.
pub(crate) async fn post(url: &str, path: &str, body: Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{url}{path}"))
        .json(&body)
        .timeout(Duration::from_secs(120))
        .send()
        .await
        .expect("an answer");
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON body"))
}

pub(crate) fn vectors(body: &Value) -> Vec<Vec<f32>> {
    let data = body["data"].as_array().expect("data");
    data.iter()
        .map(|d| {
            d["embedding"].as_array().expect("vector").iter().map(|x| x.as_f64().expect("f") as f32).collect()
        })
        .collect()
}

pub(crate) async fn get_json(url: &str, path: &str) -> Value {
    reqwest::get(format!("{url}{path}")).await.expect("GET").json().await.expect("JSON")
}

/// The value of `series` in the server's `/metrics`; a counter (`_total`) never counted is
/// absent there, and reads 0.
pub(crate) async fn metric(url: &str, series: &str) -> f64 {
    let counter = series.split('{').next().is_some_and(|name| name.ends_with("_total"));
    match metric_if_shown(url, series).await {
        Some(value) => value,
        None if counter => 0.0,
        None => panic!("{series} is not in {url}/metrics"),
    }
}

/// The value of `series` in the server's `/metrics`, if it is there.
pub(crate) async fn metric_if_shown(url: &str, series: &str) -> Option<f64> {
    let text = reqwest::get(format!("{url}/metrics")).await.expect("metrics").text().await.expect("text");
    let line = text.lines().find(|l| l.starts_with(series))?;
    Some(line.rsplit(' ').next().and_then(|v| v.parse().ok()).expect("a number"))
}

/// `tests/clients/SCRIPT ARGS` run by python3 (the client needs what `needs` says, as .ci/run
/// installs it), held to its last line.
pub(crate) async fn python_client(script: &str, args: &[&str], needs: &str) {
    let path = format!("{}/tests/clients/{script}", env!("CARGO_MANIFEST_DIR"));
    let args: Vec<String> = std::iter::once(path).chain(args.iter().map(|a| a.to_string())).collect();
    let out = tokio::task::spawn_blocking(move || Command::new("python3").args(args).output())
        .await
        .expect("join")
        .unwrap_or_else(|e| panic!("python3 runs (the client needs: {needs}, as .ci/run does): {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.trim_end().ends_with("all client checks passed"),
        "{script}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The worker processes of the server, in instance order: (unit, pid, start kind, total ms).
pub(crate) async fn workers(url: &str) -> Vec<(String, u32, String, f64)> {
    let info = get_json(url, "/info").await;
    assert_eq!(info["workers"]["kind"], "process", "{info}");
    let instances = info["workers"]["instances"].as_array().expect("instances").clone();
    instances
        .iter()
        .map(|w| {
            let start = &w["start"];
            let kind = start["kind"].as_str().expect("kind").to_string();
            (
                w["unit"].as_str().expect("unit").into(),
                w["pid"].as_u64().expect("pid") as u32,
                kind,
                start["total_ms"].as_f64().expect("ms"),
            )
        })
        .collect()
}

pub(crate) fn signal(pid: u32, name: &str) {
    let status = Command::new("kill").args([&format!("-{name}"), &pid.to_string()]).status().expect("kill");
    assert!(status.success(), "kill -{name} {pid}");
}

pub(crate) async fn until(what: &str, mut ready: impl AsyncFnMut() -> bool) {
    for _ in 0..600 {
        if ready().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

/// A network namespace standing in for a host, removed (with its links) when dropped.
pub(crate) struct Netns {
    pub(crate) name: String,
    /// The ends of its links in this process's namespace: deleted with it (a namespace is
    /// destroyed only once its last socket is gone, which can take a minute, and its links'
    /// addresses would shadow those of the next test's until then).
    outer: std::cell::RefCell<Vec<String>>,
}

/// Runs `ip` with `args`; panics with its error if it fails.
fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("running ip");
    assert!(out.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
}

/// veth names are at most 15 bytes: a process-unique stem and a counter.
fn veth_names() -> (String, String) {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let stem = format!("mv{}x{n}", std::process::id() % 100_000);
    (format!("{stem}a"), format!("{stem}b"))
}

impl Netns {
    /// A namespace with loopback up (a stale one of the same name is removed first); `Err` with
    /// `ip`'s words when namespaces cannot be made here (not root, no iproute2).
    pub(crate) fn try_new(name: &str) -> Result<Self, String> {
        let _ = Command::new("ip").args(["netns", "del", name]).output();
        let out = Command::new("ip").args(["netns", "add", name]).output().map_err(|e| format!("ip: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
        }
        let netns = Netns { name: name.into(), outer: Default::default() };
        ip(&["netns", "exec", name, "ip", "link", "set", "lo", "up"]);
        Ok(netns)
    }

    /// A namespace joined to this process's one by a veth pair: `host` here, `peer` there (/30).
    pub(crate) fn new(name: &str, host: &str, peer: &str) -> Self {
        let netns = Self::try_new(name).unwrap_or_else(|e| panic!("ip netns add {name}: {e}"));
        netns.link_here(host, peer);
        netns
    }

    /// A veth pair between this process's namespace (`here`) and this one (`there`), a /30.
    pub(crate) fn link_here(&self, here: &str, there: &str) {
        let (outer, inner) = veth_names();
        ip(&["link", "add", &outer, "type", "veth", "peer", "name", &inner]);
        ip(&["addr", "add", &format!("{here}/30"), "dev", &outer]);
        ip(&["link", "set", &outer, "up"]);
        self.take(&inner, there);
        self.outer.borrow_mut().push(outer);
    }

    /// A veth pair between this namespace (`here`) and `other` (`there`), a /30.
    pub(crate) fn link(&self, here: &str, other: &Netns, there: &str) {
        let (a, b) = veth_names();
        ip(&["link", "add", &a, "type", "veth", "peer", "name", &b]);
        self.take(&a, here);
        other.take(&b, there);
    }

    /// Moves the link `dev` into this namespace with address `addr`/30, up.
    fn take(&self, dev: &str, addr: &str) {
        ip(&["link", "set", dev, "netns", &self.name]);
        ip(&["netns", "exec", &self.name, "ip", "addr", "add", &format!("{addr}/30"), "dev", dev]);
        ip(&["netns", "exec", &self.name, "ip", "link", "set", dev, "up"]);
    }

    /// Sends what has no nearer route through `via` (a neighbour on one of its links).
    pub(crate) fn default_route(&self, via: &str) {
        ip(&["netns", "exec", &self.name, "ip", "route", "add", "default", "via", via]);
    }

    /// `program` run inside this namespace.
    pub(crate) fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name]).arg(program);
        cmd
    }

    /// Every process running in this namespace.
    pub(crate) fn pids(&self) -> Vec<u32> {
        let out = Command::new("ip").args(["netns", "pids", &self.name]).output().expect("ip netns pids");
        String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| l.trim().parse().ok()).collect()
    }
}

impl Drop for Netns {
    /// Kills what still runs inside, then removes the namespace and its links.
    fn drop(&mut self) {
        for pid in self.pids() {
            let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
        }
        for dev in self.outer.borrow().iter() {
            let _ = Command::new("ip").args(["link", "del", dev]).output();
        }
        let _ = Command::new("ip").args(["netns", "del", &self.name]).output();
    }
}
