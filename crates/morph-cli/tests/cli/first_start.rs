//! A first start on a model Morph has no profile for, as a user meets it: `morph serve --model
//! DIR` with stderr a file (not a terminal) and an empty profile cache. The log says each
//! profiling step as a line, in order, before the server serves; the fitted profiles are cached
//! by the model's content; the same model under another folder name starts without profiling,
//! its buckets refined to the batches it serves.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use morph_fetch::{ModelFiles, ModelSource, Pip, fetch, morph_home, onnxruntime_library};

use crate::common;

use common::{Served, TEXTS, embed, get_json};

/// The default model under `name` in `root`, its config with one field more: a new content,
/// which no shipped or cached profile fits.
fn renamed_default(root: &Path, name: &str) -> ModelFiles {
    let files = fetch(&ModelSource::Default, &morph_home()).expect("fetching the default model");
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).expect("the first start");
    for part in ["model.safetensors", "tokenizer.json", "1_Pooling"] {
        std::os::unix::fs::symlink(files.dir.join(part), dir.join(part)).expect("the first start");
    }
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&files.config).expect("the first start"))
            .expect("the first start");
    config["_copied_for"] = "first_start.rs".into();
    std::fs::write(dir.join("config.json"), config.to_string()).expect("the first start");
    fetch(&ModelSource::Local(dir), &morph_home()).expect("the copy")
}

/// `morph serve --model DIR` with `home` as MORPH_HOME, its stderr written to `log`.
fn serve_logged(model: &Path, home: &Path, log: &Path) -> Served {
    let library = onnxruntime_library(None, &morph_home(), &Pip::from_env()).expect("ONNX Runtime");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_morph"));
    cmd.args(["serve", "--port", "0", "--model"]).arg(model);
    cmd.env("MORPH_HOME", home).env("ORT_DYLIB_PATH", library).env_remove("RUST_LOG");
    cmd.stderr(Stdio::from(std::fs::File::create(log).expect("the first start")));
    Served::start_logged(cmd)
}

/// The log's messages from `morph_server::starting`, in order.
fn start_steps(log: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(log).expect("the first start");
    text.lines()
        .filter_map(|l| l.split_once("morph_server::starting: "))
        .map(|(_, m)| m.to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_start_logs_each_profiling_step_and_a_renamed_copy_reuses_the_profile() {
    let root = tempfile::tempdir().expect("the first start");
    let home = root.path().join("home");
    std::fs::create_dir_all(&home).expect("the first start");
    let model = renamed_default(root.path(), "my-encoder");
    let sha = model.content_sha256().expect("the first start");

    let log = root.path().join("first.log");
    let server = serve_logged(&model.dir, &home, &log);
    let (status, body) = embed(&server.url, &TEXTS).await;
    assert_eq!(status, 200, "{body}");
    drop(server);
    let steps = start_steps(&log);
    let layouts: Vec<&String> = steps.iter().filter(|s| s.ends_with(": 0/8")).collect();
    assert!(!layouts.is_empty(), "no layout was profiled: {steps:#?}");
    for layout in layouts {
        let what = layout.trim_end_matches(": 0/8");
        let done: Vec<&String> =
            steps.iter().filter(|s| s.starts_with(what) && !s.ends_with(": 0/8")).collect();
        let counted: Vec<String> = done
            .iter()
            .map(|s| s[what.len() + 2..].split(' ').next().expect("the first start").to_string())
            .collect();
        assert_eq!(counted, (1..=8).map(|k| format!("{k}/8")).collect::<Vec<_>>(), "{steps:#?}");
    }
    assert_eq!(steps.last().map(String::as_str), Some("starting the instances"), "{steps:#?}");
    let cached: Vec<PathBuf> = std::fs::read_dir(home.join("profiles"))
        .expect("the first start")
        .map(|e| e.expect("the first start").path())
        .collect();
    assert!(!cached.is_empty());
    for path in &cached {
        let profile = morph_core::LatencyProfile::load(path).expect("the first start");
        assert_eq!(profile.model_sha256.as_deref(), Some(sha.as_str()), "{}", path.display());
        let graph = Some(morph_encoder::onnx::GRAPH_FINGERPRINT);
        assert_eq!(profile.graph.as_deref(), graph, "the graph timed: {}", path.display());
        assert!(
            path.file_name()
                .expect("the first start")
                .to_str()
                .expect("the first start")
                .starts_with(&sha[..16])
        );
        assert_eq!(profile.batches().collect::<Vec<_>>(), vec![1, 2, 4, 8, 16], "the fit fills the grid");
        let name = path.to_string_lossy();
        assert!(name.ends_with(".measured.json") && profile.served_batches.is_none(), "{name}: measured");
    }

    // The same content in another folder: found by its hash, nothing measured.
    let again = renamed_default(root.path(), "another-name");
    let log = root.path().join("second.log");
    let server = serve_logged(&again.dir, &home, &log);
    let info = get_json(&server.url, "/info").await;
    assert!(info["policy"]["bucket_refits"].is_u64(), "a fitted profile's buckets are refined: {info}");
    drop(server);
    let steps = start_steps(&log);
    assert!(!steps.iter().any(|s| s.starts_with("profiling")), "{steps:#?}");
    let text = std::fs::read_to_string(&log).expect("the first start");
    assert!(text.contains(&format!("profile={}", home.join("profiles").display())), "{text}");
}
