//! A model named by hub id resolves through Morph's hub code path, tested against a local
//! mirror of the hub's file layout (the hub itself is not reachable here): `morph fetch --model
//! ORG/NAME --revision REV` with `HF_ENDPOINT` at the mirror and `HF_TOKEN` set downloads every
//! file at that revision (the sentence-transformers config among them), sends the token, and caches them in `MORPH_HOME/hub`; a decoder named
//! `ORG/NAME:QUANT` is picked from the repository's file list the same way.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

fn morph() -> Command {
    Command::new(env!("CARGO_BIN_EXE_morph"))
}

/// What the mirror saw of each request: its path and its Authorization header.
type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// The commit every file of the mirror's repository is at.
const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

/// Serves `dir`'s files as the hub does at `/{repo}/resolve/{revision}/{file}`: ranged GETs
/// answered 206 with the ETag, X-Repo-Commit and Content-Range headers hf-hub reads.
fn mirror(dir: PathBuf, repo: &'static str, revision: &'static str) -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding the mirror");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    let seen: Seen = Arc::default();
    let log = seen.clone();
    std::thread::spawn(move || {
        let listing = format!("/api/models/{repo}/revision/{revision}");
        for stream in listener.incoming().flatten() {
            answer(stream, &dir, &format!("/{repo}/resolve/{revision}/"), &listing, &log);
        }
    });
    (url, seen)
}

/// Answers one request: the repository's file list at `listing` (as the hub's API gives it),
/// a file under `prefix`, else 404.
fn answer(mut stream: TcpStream, dir: &Path, prefix: &str, listing: &str, seen: &Seen) {
    let mut reader = BufReader::new(stream.try_clone().expect("stream"));
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let path = line.split_whitespace().nth(1).unwrap_or_default().to_string();
    let (mut range_start, mut auth) = (0u64, None);
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).is_err() || header.trim().is_empty() {
            break;
        }
        let (name, value) = header.split_once(':').unwrap_or_default();
        match name.trim().to_ascii_lowercase().as_str() {
            "range" => {
                let from = value.trim().trim_start_matches("bytes=").split('-').next().unwrap_or("0");
                range_start = from.parse().unwrap_or(0);
            }
            "authorization" => auth = Some(value.trim().to_string()),
            _ => {}
        }
    }
    seen.lock().expect("log").push((path.clone(), auth));
    if path == listing {
        let files = std::fs::read_dir(dir).expect("the repository").flatten();
        let siblings: Vec<_> =
            files.map(|f| serde_json::json!({"rfilename": f.file_name().to_string_lossy()})).collect();
        let body = serde_json::json!({"sha": COMMIT, "siblings": siblings}).to_string();
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(body.as_bytes()));
        return;
    }
    let file = path.strip_prefix(prefix).map(|f| dir.join(f)).filter(|f| f.is_file());
    let Some(file) = file else {
        let _ = stream.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        return;
    };
    let mut bytes = Vec::new();
    std::fs::File::open(&file).and_then(|mut f| f.read_to_end(&mut bytes)).expect("reading a file");
    let size = bytes.len() as u64;
    let etag = morph_fetch::sha256_hex(&file).expect("hashing");
    // Both the metadata probe (bytes=0-0) and a download get the rest from their start; the
    // probe reads only the headers.
    let end = size.saturating_sub(1);
    let body = &bytes[range_start as usize..=end as usize];
    let head = format!(
        "HTTP/1.1 206 Partial Content\r\netag: \"{etag}\"\r\nx-repo-commit: {COMMIT}\r\ncontent-range: bytes {range_start}-{end}/{size}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(body));
}

#[test]
fn a_hub_id_at_a_revision_resolves_through_a_mirror_of_the_hub_with_the_token() {
    // The default model's files, as the mirror's repository.
    let fetched = morph().arg("fetch").args(["--engine", "candle"]).output().expect("morph fetch");
    assert!(fetched.status.success(), "{}", String::from_utf8_lossy(&fetched.stderr));
    let default_dir =
        PathBuf::from(String::from_utf8_lossy(&fetched.stdout).lines().next().expect("a dir").trim());
    let (url, seen) = mirror(default_dir.clone(), "mirror-org/mini", "v1");
    let home = tempfile::tempdir().expect("MORPH_HOME");
    let out = morph()
        .args(["fetch", "--engine", "candle", "--model", "mirror-org/mini", "--revision", "v1"])
        .env("MORPH_HOME", home.path())
        .env("HF_ENDPOINT", &url)
        .env("HF_TOKEN", "hf_test_token")
        .output()
        .expect("morph fetch from the mirror");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).lines().next().expect("a dir").trim());
    assert!(dir.starts_with(home.path().join("hub")), "cached in MORPH_HOME/hub: {}", dir.display());
    for file in ["config.json", "model.safetensors", "tokenizer.json", "sentence_bert_config.json"] {
        let (got, want) =
            (morph_fetch::sha256_hex(&dir.join(file)), morph_fetch::sha256_hex(&default_dir.join(file)));
        assert_eq!(got.expect("downloaded"), want.expect("original"), "{file}");
    }
    let seen = seen.lock().expect("log").clone();
    assert!(!seen.is_empty());
    // The prompts' config is asked for (this mirror has none: the model is served without).
    assert!(seen.iter().any(|(path, _)| path.ends_with("/config_sentence_transformers.json")), "{seen:?}");
    for (path, auth) in &seen {
        assert!(path.starts_with("/mirror-org/mini/resolve/v1/"), "at the revision: {path}");
        assert_eq!(auth.as_deref(), Some("Bearer hf_test_token"), "{path}");
    }
    // A revision for a model that is not a hub id is refused in one line.
    let local = morph()
        .args(["fetch", "--engine", "candle", "--model"])
        .arg(&default_dir)
        .args(["--revision", "v1"])
        .output()
        .expect("morph fetch");
    assert!(!local.status.success());
    assert!(String::from_utf8_lossy(&local.stderr).contains("--revision v1 names a hub revision"));
}

/// A decoder named as llama-server's `-hf` names one, `ORG/NAME:QUANT`, resolves through the hub
/// code path: the repository's file list picks the GGUF holding QUANT, downloaded at the
/// revision with the token into `MORPH_HOME/hub`; without a QUANT and no Q4_K_M among several
/// GGUFs, the error lists them.
#[test]
fn a_hub_gguf_by_quantisation_resolves_through_a_mirror_of_the_hub() {
    let fetched = morph().args(["fetch", "--task", "generate"]).output().expect("morph fetch");
    assert!(fetched.status.success(), "{}", String::from_utf8_lossy(&fetched.stderr));
    let smollm =
        PathBuf::from(String::from_utf8_lossy(&fetched.stdout).lines().next().expect("a GGUF").trim());
    let repo = tempfile::tempdir().expect("the repository");
    for name in ["SmolLM2-135M-Instruct-Q4_1.gguf", "SmolLM2-135M-Instruct-Q8_0.gguf"] {
        std::fs::hard_link(&smollm, repo.path().join(name))
            .or_else(|_| std::fs::copy(&smollm, repo.path().join(name)).map(|_| ()))
            .expect("a GGUF in the repository");
    }
    std::fs::write(repo.path().join("README.md"), "SmolLM2 GGUFs").expect("README");
    let (url, seen) = mirror(repo.path().to_path_buf(), "mirror-org/smol-gguf", "v1");
    let home = tempfile::tempdir().expect("MORPH_HOME");
    let fetch = |model: &str| {
        morph()
            .args(["fetch", "--task", "generate", "--model", model, "--revision", "v1"])
            .env("MORPH_HOME", home.path())
            .env("HF_ENDPOINT", &url)
            .env("HF_TOKEN", "hf_test_token")
            .output()
            .expect("morph fetch from the mirror")
    };
    let out = fetch("mirror-org/smol-gguf:q4_1");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).lines().next().expect("a path").trim());
    assert!(path.starts_with(home.path().join("hub")), "cached in MORPH_HOME/hub: {}", path.display());
    assert!(path.ends_with("SmolLM2-135M-Instruct-Q4_1.gguf"), "{}", path.display());
    let (got, want) = (morph_fetch::sha256_hex(&path), morph_fetch::sha256_hex(&smollm));
    assert_eq!(got.expect("downloaded"), want.expect("original"));
    let seen = seen.lock().expect("log").clone();
    assert!(seen.iter().any(|(p, _)| p == "/api/models/mirror-org/smol-gguf/revision/v1"), "{seen:?}");
    assert!(seen.iter().all(|(_, auth)| auth.as_deref() == Some("Bearer hf_test_token")), "{seen:?}");

    let out = fetch("mirror-org/smol-gguf");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("name the quantisation as ORG/NAME:QUANT") && err.contains("Q8_0.gguf"), "{err}");
}
