//! The `morph` binary end to end: serve (emulated engines), bench against it, stop with SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

fn morph() -> Command {
    Command::new(env!("CARGO_BIN_EXE_morph"))
}

/// `morph serve --port 0 ARGS`, and the URL it listens on.
fn serving(args: &[&str]) -> (Child, String) {
    let mut server = morph()
        .args(["serve", "--port", "0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting morph serve");
    let url = listening_url(&mut server);
    (server, url)
}

/// Reads the server's first stdout line, `morph listening on http://ADDR`.
fn listening_url(child: &mut Child) -> String {
    let stdout = child.stdout.take().expect("piped stdout");
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).expect("reading stdout");
    line.trim()
        .strip_prefix("morph listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
        .to_string()
}

#[test]
fn serve_bench_and_stop() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("profile.json");
    std::fs::write(
        &profile,
        r#"{"model":"flat","latency":{"1":{"1":2.0,"512":2.0},"8":{"1":4.0,"512":4.0}}}"#,
    )
    .unwrap();
    let corpus = dir.path().join("corpus.txt");
    std::fs::write(&corpus, "first text\nsecond, longer text\nthird\n").unwrap();

    let profile = profile.to_str().expect("utf-8 path");
    let (mut server, url) = serving(&["--engine", "emulated", "--instances", "3", "--profile", profile]);

    let requests_out = dir.path().join("requests.jsonl");
    let bench = morph()
        .args(["bench", "--url", &url, "--rate", "20,40", "--duration", "1", "--json", "--corpus"])
        .arg(&corpus)
        .arg("--requests-out")
        .arg(&requests_out)
        .output()
        .expect("running morph bench");
    assert!(bench.status.success(), "{}", String::from_utf8_lossy(&bench.stderr));
    let reports: serde_json::Value = serde_json::from_slice(&bench.stdout).expect("bench JSON");
    let reports = reports.as_array().expect("one report per rate");
    assert_eq!(reports.len(), 2);
    for r in reports {
        assert!(r["sent"].as_u64().unwrap() > 5, "{r}");
        assert_eq!(r["errors"], 0, "{r}");
        assert!(r["latency"]["p99_ms"].as_f64().unwrap() >= 2.0, "{r}");
    }
    // --requests-out: a line per request sent, each run's in send order, answered 200.
    let lines = read_jsonl(&requests_out);
    let sent: u64 = reports.iter().map(|r| r["sent"].as_u64().unwrap()).sum();
    assert_eq!(lines.len() as u64, sent);
    for (rate, report) in [20.0, 40.0].iter().zip(reports) {
        let run: Vec<&serde_json::Value> = lines.iter().filter(|l| l["rate"] == *rate).collect();
        assert_eq!(run.len() as u64, report["sent"].as_u64().unwrap(), "rate {rate}");
        for (i, pair) in run.windows(2).enumerate() {
            assert_eq!(pair[1]["index"], i + 1);
            assert!(pair[0]["send_s"].as_f64() <= pair[1]["send_s"].as_f64(), "{pair:?}");
        }
        assert!(
            run.iter().all(|l| l["status"] == 200 && l["latency_ms"].as_f64().unwrap() >= 2.0),
            "{run:?}"
        );
    }

    // The same server replays a scenario's stream (texts of exactly each request's length).
    let scenario = dir.path().join("scenario.toml");
    std::fs::write(
        &scenario,
        r#"name = "replay"
duration_s = 1
seeds = [3]
[workload]
arrivals = { kind = "poisson", rate = 30 }
lengths = { kind = "uniform", min = 4, max = 40 }
[cluster]
profile = "profile.json"
runtimes = [{ runtime = "dynamic:512x8", instances = 3 }]
[[policies]]
name = "dynamic-batching"
"#,
    )
    .unwrap();
    let replay =
        morph().args(["bench", "--url", &url, "--json", "--scenario"]).arg(&scenario).output().unwrap();
    assert!(replay.status.success(), "{}", String::from_utf8_lossy(&replay.stderr));
    let live: serde_json::Value = serde_json::from_slice(&replay.stdout).unwrap();
    let out_dir = dir.path().join("sim-out");
    let sim = morph()
        .args(["simulate", "--json", "--scenario"])
        .arg(&scenario)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(sim.status.success(), "{}", String::from_utf8_lossy(&sim.stderr));
    let sim: serde_json::Value = serde_json::from_slice(&sim.stdout).unwrap();
    assert_eq!(live[0]["sent"], sim[0]["requests"], "live and simulated runs see the same stream");
    assert_eq!(live[0]["errors"], 0);
    assert!(sim[0]["mean_latency_ms"].as_f64().unwrap() >= 2.0);
    let summary = std::fs::read_to_string(out_dir.join("summary.csv")).unwrap();
    assert_eq!(summary.lines().count(), 2, "{summary}");
    assert!(
        summary.starts_with("policy,sweep,seed,requests,") && summary.contains("dynamic-batching,-,3,"),
        "{summary}"
    );
    let utilisation = std::fs::read_to_string(out_dir.join("utilisation.csv")).unwrap();
    assert_eq!(utilisation.lines().count(), 1 + 3, "one line per instance: {utilisation}");
    for plot in ["latency_cdf.svg", "queue.svg", "instances.svg"] {
        assert!(std::fs::read_to_string(out_dir.join(plot)).unwrap().contains("<svg"), "{plot}");
    }

    // SIGTERM to the PID we started: the re-exec keeps the PID, and the server drains and exits 0.
    let killed = Command::new("kill").args(["-TERM", &server.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let status = server.wait().unwrap();
    assert!(status.success(), "morph serve exited with {status}");
}

/// One HTTP/1.1 call over a plain socket: the whole answer, head and body.
fn raw_call(url: &str, request: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(url.trim_start_matches("http://")).expect("connect");
    stream.write_all(request.as_bytes()).expect("send");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("answer");
    answer
}

/// Logs as JSON lines carry each call's request id (the client's, echoed in the answer's
/// header); text logs written to a file hold no colour codes.
#[test]
fn logs_carry_each_calls_request_id_and_no_colour_off_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("profile.json");
    std::fs::write(&profile, r#"{"model":"flat","latency":{"1":{"1":2.0,"512":2.0}}}"#).unwrap();
    let body = r#"{"inputs": "hello"}"#;
    let call = format!(
        "POST /embed HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nx-request-id: call-42\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    for json in [true, false] {
        let log = dir.path().join(format!("log-{json}.txt"));
        let mut command = morph();
        command.args(["serve", "--port", "0", "--engine", "emulated", "--profile"]).arg(&profile);
        if json {
            command.arg("--json-logs");
        }
        let file = std::fs::File::create(&log).unwrap();
        let mut server = command.stdout(Stdio::piped()).stderr(file).spawn().expect("starting morph serve");
        let url = listening_url(&mut server);
        let answer = raw_call(&url, &call);
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.to_lowercase().contains("x-request-id: call-42\r\n"), "the id is echoed: {answer}");
        Command::new("kill").args(["-TERM", &server.id().to_string()]).status().unwrap();
        server.wait().unwrap();
        let logs = std::fs::read_to_string(&log).unwrap();
        assert!(!logs.contains('\u{1b}'), "no colour codes in a file: {logs}");
        if json {
            let answered = logs
                .lines()
                .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap_or_else(|e| panic!("{e}: {l}")))
                .find(|l| l["fields"]["message"] == "answered")
                .unwrap_or_else(|| panic!("a line for the call: {logs}"));
            assert_eq!(answered["span"]["id"], "call-42", "{answered}");
            assert_eq!(answered["span"]["route"], "/embed", "{answered}");
            assert_eq!(answered["fields"]["status"], 200, "{answered}");
        } else {
            assert!(logs.contains("call{id=call-42 route=/embed}"), "{logs}");
        }
    }
}

/// A stand-in OpenTelemetry collector: answers every HTTP request 200 and keeps each one's
/// request line and body.
fn collector() -> (String, std::sync::mpsc::Receiver<(String, Vec<u8>)>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port for the collector");
    let url = format!("http://{}/v1/traces", listener.local_addr().expect("the collector's address"));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let Ok(read_half) = stream.try_clone() else { continue };
            let mut reader = BufReader::new(read_half);
            let mut request_line = String::new();
            let _ = reader.read_line(&mut request_line);
            let mut length = 0;
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap_or(0) == 0 || header.trim().is_empty() {
                    break;
                }
                if let Some(v) = header.to_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
            let _ = tx.send((request_line.trim().to_string(), body));
        }
    });
    (url, rx)
}

/// With --otlp-endpoint, a call's span, with its request id, and the span of the batch that
/// ran it reach the collector as an OTLP/HTTP export (at the latest when the server stops and
/// flushes).
#[test]
fn spans_are_exported_over_otlp() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("profile.json");
    std::fs::write(&profile, r#"{"model":"flat","latency":{"1":{"1":2.0,"512":2.0}}}"#).unwrap();
    let (endpoint, exports) = collector();
    let mut server = morph()
        .args(["serve", "--port", "0", "--engine", "emulated", "--profile"])
        .arg(&profile)
        .args(["--otlp-endpoint", &endpoint])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting morph serve");
    let url = listening_url(&mut server);
    let body = r#"{"inputs": "hello"}"#;
    let call = format!(
        "POST /embed HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nx-request-id: traced-7\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    assert!(raw_call(&url, &call).starts_with("HTTP/1.1 200"));
    Command::new("kill").args(["-TERM", &server.id().to_string()]).status().unwrap();
    server.wait().unwrap();
    let (line, body) = exports.recv_timeout(std::time::Duration::from_secs(30)).expect("an export");
    assert!(line.starts_with("POST /v1/traces"), "{line}");
    let has = |needle: &[u8]| body.windows(needle.len()).any(|w| w == needle);
    assert!(has(b"call") && has(b"traced-7") && has(b"/embed"), "the call's span with its id and route");
    assert!(has(b"batch"), "the span of the batch that ran it (linked to the call's)");
}

#[test]
fn misuse_gets_one_clear_line() {
    let out = morph().args(["serve", "--engine", "emulated"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--engine emulated needs --profile FILE"), "{err}");
    // A generation server's --engine runs only its length predictor's encoder: refused where
    // none runs, never ignored; and an encoder graph's flags are refused outright.
    let decoder = ["serve", "--port", "0", "--task", "generate", "--engine", "candle"];
    let out = morph().args(decoder).env_remove("RUST_BACKTRACE").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--engine sets the length predictor's encoder"), "{err}");
    assert!(err.contains("policy 'fcfs' runs none") && err.contains("--decoder-kernels"), "{err}");
    let plans = ["serve", "--port", "0", "--task", "generate", "--policy", "ssjf", "--plans", "merge:1"];
    let out = morph().args(plans).env_remove("RUST_BACKTRACE").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--plans is for an encoder's engine"), "{err}");
    let out = morph().args(["serve", "--runtime", "fixed:128"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("is not KIND:MAX_LENxMAX_BATCH"), "{err}");
    let profile = morph_assets::path("profiles/minilm_candle_cpu_2core.json");
    let profile = profile.to_str().expect("a UTF-8 path");
    let fleet = ["serve", "--port", "0", "--engine", "emulated", "--profile", profile, "--policy"];
    let out = morph().args(fleet).arg("arlo").env_remove("RUST_BACKTRACE").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("policy 'arlo' needs an SLO"), "{err}");
    let out = morph()
        .args(fleet)
        .args(["st", "--slo-ms", "100", "--policy-params", r#"{"lamda": 1}"#])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("unknown field `lamda`"), "{err}");
    let out = morph().args(fleet).args(["arlo", "--slo-ms", "100", "--workers", "process"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--workers process runs with dynamic-batching"), "{err}");
    let emulated =
        ["serve", "--port", "0", "--engine", "emulated", "--profile", profile, "--workers", "process"];
    let out = morph().args(emulated).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("worker processes run the ONNX graphs Morph writes"),
        "{err}"
    );
    let whole_decoders = ["serve", "--port", "0", "--task", "generate", "--workers", "process"];
    let out = morph().args(whole_decoders).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("worker processes run a decoder's prefill stages"),
        "{err}"
    );
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let url = format!("http://{closed}");
    let out = morph().args(["bench", "--url", &url, "--corpus", "x.txt", "--rate", "1"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("connection refused"), "{err}");
    for (flags, says) in [
        (["--max-queue", "0"], "--max-queue must be at least 1"),
        (["--max-client-batch", "0"], "--max-client-batch must be at least 1"),
        (["--instances", "0"], "--instances must be at least 1"),
    ] {
        let out = morph().args(["serve", "--port", "0"]).args(flags).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(says), "{flags:?}: {err}");
    }
    // A cluster: flags checked before anything loads; an etcd nobody answers at, said so.
    let cluster = ["serve", "--port", "0", "--engine", "ort", "--runtime", "dynamic:64x4"];
    for (flags, says) in [
        (vec!["--etcd", &url], "--etcd needs --advertise IP"),
        (vec!["--etcd", "10.0.0.1:2379", "--advertise", "127.0.0.1"], "expected etcd's client URL"),
        (vec!["--etcd", &url, "--advertise", "127.0.0.1"], "cluster: etcd at"),
    ] {
        let out = morph().args(cluster).args(&flags).env_remove("RUST_BACKTRACE").output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(says), "{flags:?}: {err}");
    }
    let out = morph().args(["agent", "--model", "x"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("an agent needs --etcd"), "{err}");
}

#[test]
fn fetch_gets_the_decoder_for_generation() {
    let out = morph().args(["fetch", "--task", "generate"]).output().unwrap();
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        out.status.success() && path.ends_with(".gguf"),
        "{path} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(std::path::Path::new(&path).is_file());
}

#[test]
fn a_missing_onnx_runtime_library_is_one_clear_line() {
    for (args, env) in [
        (
            vec![
                "serve",
                "--port",
                "0",
                "--engine",
                "ort",
                "--ort-library",
                "/nonexistent/libonnxruntime.so",
            ],
            None,
        ),
        (vec!["profile", "--engine", "ort", "--out", "/dev/null"], Some("/nonexistent/libonnxruntime.so")),
    ] {
        let mut cmd = morph();
        cmd.args(&args).env_remove("RUST_BACKTRACE").env_remove("ORT_DYLIB_PATH");
        if let Some(path) = env {
            cmd.env("ORT_DYLIB_PATH", path);
        }
        let out = cmd.output().unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("the ONNX Runtime library /nonexistent/libonnxruntime.so")
                && err.contains("does not exist"),
            "{args:?}: {err}"
        );
        // The server logs that it listens (and, on an empty MORPH_HOME, the model's one-time
        // fetch) before it fails; past the INFO lines the error is one line.
        let error_lines = err.trim().lines().filter(|l| !l.contains(" INFO ")).count();
        assert_eq!(error_lines, 1, "{args:?}: {err}");
    }
    let out = morph().args(["serve", "--task", "generate", "--model", "weights.bin"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("must be a .gguf file"), "{err}");
    let out = morph().args(["serve", "--engine", "candle", "--onnx", "model.onnx"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--onnx runs on ONNX Runtime"), "{err}");
    // A dtype the runtime cannot run, or an engine that does not quantise, is one clear line.
    let out = morph().args(["serve", "--dtype", "bf16"]).env_remove("RUST_BACKTRACE").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("no bfloat16 MatMul kernel"), "{err}");
    let out = morph()
        .args(["serve", "--engine", "candle", "--dtype", "int8"])
        .env_remove("RUST_BACKTRACE")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.trim().lines().count() == 1 && err.contains("use --engine ort"),
        "{err}"
    );
}

/// Three ShareGPT conversations (one with two rounds), in the file's form; "c7" is in the
/// predictor's test split, the others in its training split.
const SHAREGPT: &str = r#"{"id": "c1", "turns": [{"role": "user", "content": "What is 2 + 2?"}]}
{"id": "c2", "turns": [{"role": "user", "content": "Name a colour."}, {"role": "assistant", "content": "Blue."}, {"role": "user", "content": "Another one?"}]}
{"id": "c7", "turns": [{"role": "user", "content": "Say hello."}]}"#;

/// [`SHAREGPT`] written into `dir`.
fn write_sharegpt(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("sharegpt.jsonl");
    std::fs::write(&path, SHAREGPT).expect("writing the conversations");
    path
}

fn read_jsonl(path: &std::path::Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).expect("a JSONL file");
    text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
}

/// `morph train lengths` answers one round per conversation with SmolLM2, appends each length,
/// and resumes: a run limited to the held-out rounds answers "c7" alone, one limited to the
/// training split the other two, and a run over all finds nothing left to answer.
#[test]
fn train_lengths_records_the_decoders_answers_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let sharegpt = write_sharegpt(dir.path());
    let out = dir.path().join("lengths.jsonl");
    let run = |rounds: &str| {
        let args =
            ["train", "lengths", "--max-tokens", "6", "--batch", "2", "--rounds", rounds, "--sharegpt"];
        let out = morph().args(args).arg(&sharegpt).arg("--out").arg(&out).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    run("heldout");
    let heldout = read_jsonl(&out);
    assert_eq!(heldout.len(), 1, "{heldout:?}");
    assert_eq!(heldout[0]["conversation"], "c7");
    assert!(run("train").contains("2 rounds to answer (1 already recorded"));
    let records = read_jsonl(&out);
    assert_eq!(records.len(), 3, "{records:?}");
    for r in &records {
        let len = r["output_len"].as_u64().unwrap();
        assert!((1..=6).contains(&len), "{r}");
        assert_eq!(r["finish"] == "length", len == 6, "{r}");
    }
    assert!(run("all").contains("0 rounds to answer (3 already recorded"));
}

/// The shared LMSYS trace's first `n` prompts, written into `dir`.
fn lmsys_prompts(dir: &std::path::Path, n: usize) -> std::path::PathBuf {
    let lmsys = morph_assets::shared_data().join("traces/lmsys_llama_05.jsonl");
    let text = std::fs::read_to_string(lmsys).expect("the shared LMSYS trace is needed here");
    let data = dir.join(format!("lmsys{n}.jsonl"));
    std::fs::write(&data, text.lines().take(n).collect::<Vec<_>>().join("\n")).expect("writing the prompts");
    data
}

/// `morph train predictor --test-lengths` trains on its --data and scores on that file's
/// test-split rounds alone (here the one round of "c7").
#[test]
fn train_predictor_scores_on_another_files_test_rounds() {
    let dir = tempfile::tempdir().unwrap();
    let data = lmsys_prompts(dir.path(), 30);
    let sharegpt = write_sharegpt(dir.path());
    let lengths = dir.path().join("lengths.jsonl");
    let record = |id: &str, len: u32| {
        format!(
            r#"{{"conversation":"{id}","round":1,"first_turn":0,"prompt_tokens":9,"output_len":{len},"finish":"stop"}}"#
        )
    };
    std::fs::write(&lengths, [record("c1", 40), record("c7", 12)].join("\n")).unwrap();
    let predictions = dir.path().join("predictions.jsonl");
    let run = morph()
        .args(["train", "predictor", "--epochs", "1", "--objectives", "regression-l1", "--data"])
        .arg(&data)
        .arg("--sharegpt")
        .arg(&sharegpt)
        .arg("--test-lengths")
        .arg(&lengths)
        .arg("--predictions")
        .arg(&predictions)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{stdout}{}", String::from_utf8_lossy(&run.stderr));
    assert!(stdout.contains(" / test 1 prompts"), "{stdout}");
    let rows = read_jsonl(&predictions);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!((rows[0]["conversation"].as_str(), rows[0]["output_len"].as_u64()), (Some("c7"), Some(12)));
}

/// `morph train predictor` on 60 LMSYS prompts: embeds them, trains every objective, prints the
/// ablation table (with Spearman's ρ), writes the first objective's head (linear, with the
/// longest training length it stops at) and the test split's predictions.
#[test]
fn train_predictor_writes_a_head_and_an_ablation_table() {
    let dir = tempfile::tempdir().unwrap();
    let data = lmsys_prompts(dir.path(), 60);
    let out = dir.path().join("predictor");
    let predictions = dir.path().join("predictions.jsonl");
    let run = morph()
        .args(["train", "predictor", "--epochs", "3", "--data"])
        .arg(&data)
        .arg("--out")
        .arg(&out)
        .arg("--predictions")
        .arg(&predictions)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{stdout}{}", String::from_utf8_lossy(&run.stderr));
    for objective in ["regression-l1", "regression-mse", "classification", "ordinal", "binary"] {
        assert!(stdout.contains(objective), "{stdout}");
    }
    assert!(out.join("head.safetensors").is_file() && out.join("predictor.json").is_file());
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("predictor.json")).unwrap()).unwrap();
    assert_eq!(meta["objective"], "regression-l1");
    assert_eq!(meta["hidden"], 0, "the default head is linear: {meta}");
    assert!(meta["buckets"]["longest"].as_u64().is_some_and(|l| l > 0), "{meta}");
    assert!(stdout.contains("Spearman"), "{stdout}");
    let rows = read_jsonl(&predictions);
    assert!(!rows.is_empty());
    for row in rows {
        assert!(
            row["output_len"].is_u64() && row["binary"].is_u64() && row["regression-l1"].is_u64(),
            "{row}"
        );
    }
}

/// `morph train adapt` on 40 examples of each split of each task, for the plain model and an
/// exit after 1 layer: it trains heads for both, writes them, and writes the profile the
/// simulator reads (the plans in order, and one correctness line per test example).
#[test]
fn train_adapt_writes_heads_and_a_profile_per_plan() {
    let dir = tempfile::tempdir().unwrap();
    let data = morph_assets::shared_data().join("text");
    let (out, profile) = (dir.path().join("tasks"), dir.path().join("profile"));
    let run = morph()
        .args([
            "train",
            "adapt",
            "--engine",
            "ort",
            "--plans=exit:1",
            "--limit",
            "40",
            "--epochs",
            "5",
            "--data",
        ])
        .arg(&data)
        .arg("--out")
        .arg(&out)
        .arg("--profile-out")
        .arg(&profile)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{stdout}{}", String::from_utf8_lossy(&run.stderr));
    assert!(out.join("heads.safetensors").is_file(), "{stdout}");
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("tasks.json")).unwrap()).unwrap();
    for head in
        ["sst2.plain", "ag_news.plain", "sms_spam.plain", "sst2.exit:1", "ag_news.exit:1", "sms_spam.exit:1"]
    {
        assert!(meta["heads"][head]["epochs"].as_u64().is_some_and(|e| (1..=5).contains(&e)), "{meta}");
    }
    let accuracy: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(profile.join("accuracy.json")).unwrap()).unwrap();
    assert_eq!(accuracy["plans"], serde_json::json!(["plain", "exit:1"]));
    assert_eq!(accuracy["tasks"], serde_json::json!(["sst2", "ag_news", "sms_spam"]));
    for task in ["sst2", "ag_news", "sms_spam"] {
        let lines =
            std::fs::read_to_string(profile.join("correctness").join(format!("{task}.jsonl"))).unwrap();
        assert_eq!(lines.lines().count(), 40, "{task}");
        let first: serde_json::Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
        assert_eq!(first["correct"].as_array().map(Vec::len), Some(2), "{first}");
    }
}

/// `morph simulate --out` on an OTAS scenario writes the utility earned over time per run
/// (utility.csv, utility.svg), the accuracy of the batches served (accuracy.csv, accuracy.svg),
/// and prints the utility account beside the latency table.
#[test]
fn simulate_writes_utility_over_time_for_query_types() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = morph_assets::path("scenarios/otas_synthetic_cpu.toml");
    let out = dir.path().join("out");
    let run = morph()
        .args(["simulate", "--scenario"])
        .arg(&scenario)
        .args(["--duration", "30", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{stdout}{}", String::from_utf8_lossy(&run.stderr));
    assert!(stdout.contains("type 1") && stdout.contains("otas (pareto)"), "{stdout}");
    let csv = std::fs::read_to_string(out.join("utility.csv")).unwrap();
    assert!(csv.starts_with("policy,sweep,seed,time_s,utility_earned\n"), "{csv}");
    // Three 10-second bins for each of the scenario's 9 policies, the earned utility never falling.
    assert_eq!(csv.lines().count(), 1 + 3 * 9, "{csv}");
    let earned: Vec<f64> =
        csv.lines().skip(1).map(|l| l.rsplit(',').next().unwrap().parse().unwrap()).collect();
    assert!(earned.chunks(3).all(|c| c[0] <= c[1] && c[1] <= c[2]), "{csv}");
    assert!(std::fs::read_to_string(out.join("utility.svg")).unwrap().contains("<svg"));
    // And the accuracy of the batches served, per bin (Fig. 11).
    let accuracy = std::fs::read_to_string(out.join("accuracy.csv")).unwrap();
    let values: Vec<f64> =
        accuracy.lines().skip(1).map(|l| l.rsplit(',').next().unwrap().parse().unwrap()).collect();
    assert!(!values.is_empty() && values.iter().all(|a| (0.0..=1.0).contains(a)), "{accuracy}");
    assert!(std::fs::read_to_string(out.join("accuracy.svg")).unwrap().contains("<svg"));
}

/// `morph simulate --host-scenario` runs the shipped RAG application (three models on one
/// 2-core host) shared by load and at its two pinned splits on the same streams, prints each
/// run and the comparison, and writes each model's cores per controller period; a host
/// scenario's errors name the model and key.
#[test]
fn simulate_a_host_of_three_models_shared_by_load_and_pinned() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = morph_assets::path("scenarios/hosts/rag_app_cpu.toml");
    let out = dir.path().join("out");
    let run = morph()
        .args(["simulate", "--host-scenario"])
        .arg(&scenario)
        .args(["--duration", "60", "--seeds", "1", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{stdout}{}", String::from_utf8_lossy(&run.stderr));
    for row in ["cores by load", "split 0|0|1", "split 0|1|1", "cores by load / best static"] {
        assert!(stdout.contains(row), "{row}: {stdout}");
    }
    let csv = std::fs::read_to_string(out.join("cores.csv")).unwrap();
    assert!(csv.starts_with("seed,sharing,start_s,embedder_cores,reranker_cores,generator_cores,critical\n"));
    // Never more cores held than the host has, in any period of any run.
    for line in csv.lines().skip(1) {
        let held: f64 = line.split(',').skip(3).take(3).map(|v| v.parse::<f64>().unwrap()).sum();
        assert!(held <= 2.0 + 1e-6, "{line}");
    }
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        format!(
            "name = \"bad\"\ncores = 2\nduration_s = 10\n[[models]]\nname = \"a\"\nscenario = \"{0}\"\n[[models]]\nname = \"a\"\nscenario = \"{0}\"\n",
            morph_assets::path("scenarios/hosts/models/rag_embedder_cpu.toml").display()
        ),
    )
    .unwrap();
    let run = morph().args(["simulate", "--host-scenario"]).arg(&bad).output().unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success() && stderr.contains("models 'a': two models have this name"), "{stderr}");
}

/// `morph simulate` warns on stderr before the table when recorded lengths exceed every runtime,
/// and after the runs for a run that left most of its requests unserved, with the reason; the
/// table's `dropped for` column gives it too.
#[test]
fn simulate_warns_on_stderr_when_a_run_drops_most_of_its_requests() {
    let dir = tempfile::tempdir().unwrap();
    let rows: String =
        (0..100).map(|i| format!("{{\"timestamp\": {}, \"input_length\": 900}}\n", i * 10)).collect();
    std::fs::write(dir.path().join("trace.jsonl"), rows).unwrap();
    let profile = morph_assets::path("profiles/minilm_candle_cpu_2core.json");
    let scenario = dir.path().join("drops.toml");
    let text = format!(
        "name = \"drops\"\nduration_s = 0.9\n[workload]\narrivals = {{ kind = \"trace\", path = \"trace.jsonl\" }}\nlengths = {{ kind = \"trace\", path = \"trace.jsonl\" }}\n[cluster]\nprofile = \"{}\"\nruntimes = [{{ runtime = \"dynamic:512x8\", instances = 1 }}]\n[[policies]]\nname = \"dynamic-batching\"\n",
        profile.display()
    );
    std::fs::write(&scenario, text).unwrap();
    let run = morph().args(["simulate", "--scenario"]).arg(&scenario).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    assert!(run.status.success(), "{stdout}{stderr}");
    assert!(
        stderr.contains("warning: workload.lengths: 100 of 100 recorded lengths (100%) exceed"),
        "{stderr}"
    );
    assert!(stderr.contains("were not served") && stderr.contains("too long for every runtime"), "{stderr}");
    assert!(stdout.contains("dropped for") && stdout.contains("too long for every runtime"), "{stdout}");
}

/// Every `serve` flag is read from `MORPH_<FLAG>` too: a variable sets it (the check refuses
/// MORPH_MAX_QUEUE=0 before anything loads), the command line wins over it, and `--help` names
/// the variables.
#[test]
fn serve_flags_are_read_from_the_environment_and_the_command_line_wins() {
    let refused = |cmd: &mut Command| {
        let out = cmd.output().unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let stderr = refused(morph().arg("serve").env("MORPH_MAX_QUEUE", "0"));
    assert!(stderr.contains("--max-queue must be at least 1"), "{stderr}");
    let stderr = refused(morph().args(["serve", "--max-queue", "0"]).env("MORPH_MAX_QUEUE", "5"));
    assert!(stderr.contains("--max-queue must be at least 1"), "the command line wins: {stderr}");
    let stderr = refused(morph().arg("serve").env("MORPH_MAX_CONNECTIONS", "many"));
    assert!(stderr.contains("many") && stderr.contains("max-connections"), "{stderr}");
    let help = morph().args(["serve", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for variable in ["MORPH_MAX_QUEUE", "MORPH_PORT", "MORPH_RUNTIME", "MORPH_POLICY_PARAMS", "MORPH_MODEL"] {
        assert!(help.contains(&format!("[env: {variable}=")), "{variable} in --help");
    }
}

/// `morph bench --endpoint chat` streams recorded rounds at SmolLM2: `--max-tokens recorded`
/// caps each answer at its recorded length, each run reports TTFT and TPOT percentiles, and a
/// run counts towards goodput only while its p99s are within the targets.
#[test]
fn bench_chat_streams_recorded_rounds_and_holds_them_to_targets() {
    let dir = tempfile::tempdir().unwrap();
    let sharegpt = write_sharegpt(dir.path());
    let lengths = dir.path().join("lengths.jsonl");
    let records = [
        r#"{"conversation":"c1","round":1,"first_turn":0,"prompt_tokens":9,"output_len":4,"finish":"stop"}"#,
        r#"{"conversation":"c2","round":2,"first_turn":2,"prompt_tokens":20,"output_len":4,"finish":"stop"}"#,
    ];
    std::fs::write(&lengths, records.join("\n")).unwrap();
    let (mut server, url) = serving(&["--task", "generate"]);
    let requests_out = dir.path().join("requests.jsonl");
    let bench = |targets: [&str; 4]| {
        let args =
            ["bench", "--url", &url, "--endpoint", "chat", "--rounds", "all", "--max-tokens", "recorded"];
        let out = morph()
            .args(args)
            .args(["--rate", "2", "--duration", "2", "--seed", "1", "--json"])
            .args(targets)
            .arg("--lengths")
            .arg(&lengths)
            .arg("--sharegpt")
            .arg(&sharegpt)
            .arg("--requests-out")
            .arg(&requests_out)
            .output()
            .expect("running morph bench");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let reports: serde_json::Value = serde_json::from_slice(&out.stdout).expect("bench JSON");
        reports[0].clone()
    };
    let lenient = bench(["--ttft-target-ms", "600000", "--tpot-target-ms", "600000"]);
    let strict = bench(["--ttft-target-ms", "0", "--tpot-target-ms", "600000"]);
    let _ = Command::new("kill").args(["-TERM", &server.id().to_string()]).status();
    let _ = server.wait();

    assert_eq!(lenient["errors"], 0, "{lenient}");
    assert!(lenient["ok"].as_u64().unwrap() >= 1, "{lenient}");
    let g = &lenient["generation"];
    assert!(g["ttft_p50_ms"].as_f64().unwrap() <= g["ttft_p99_ms"].as_f64().unwrap(), "{g}");
    assert!(
        g["ttft_p99_ms"].as_f64().unwrap() <= lenient["latency"]["max_ms"].as_f64().unwrap(),
        "{lenient}"
    );
    assert!(g["tpot_p50_ms"].as_f64().unwrap() > 0.0, "{g}");
    assert!(g["output_tokens_per_s"].as_f64().unwrap() > 0.0, "{g}");
    assert_eq!(g["within_targets"], true, "{g}");
    assert_eq!(g["goodput_rps"], lenient["throughput_rps"], "{lenient}");
    // No first token comes within 0 ms: the same stream is out of target, with no goodput.
    assert_eq!(strict["generation"]["within_targets"], false, "{strict}");
    assert_eq!(strict["generation"]["goodput_rps"], 0.0, "{strict}");
    // Each answer's usage came through the stream, capped at the recorded 4 tokens (SmolLM2's
    // answers to these run longer).
    let lines = read_jsonl(&requests_out);
    assert!(!lines.is_empty());
    for line in &lines {
        let tokens = line["usage"]["completion_tokens"].as_u64().unwrap_or_else(|| panic!("{line}"));
        assert!((1..=4).contains(&tokens), "{line}");
    }
}
