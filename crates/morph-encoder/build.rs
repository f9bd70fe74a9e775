//! Fingerprints the code that writes and runs Morph's ONNX graph (the writer, its int8
//! calibration, Morph's own operators, and the ONNX Runtime sessions) into `MORPH_GRAPH_FINGERPRINT`: a latency profile
//! cached by a build whose graph differs measured another graph, and is measured again.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};

/// The sources whose content the fingerprint covers: every file under these.
const SOURCES: [&str; 5] =
    ["src/onnx", "src/calibration.rs", "src/ort_kernels", "src/ort_runtime.rs", "src/ort_session.rs"];

fn files_under(path: &Path, found: &mut Vec<PathBuf>) {
    match std::fs::read_dir(path) {
        Ok(entries) => {
            for entry in entries.flatten() {
                files_under(&entry.path(), found);
            }
        }
        Err(_) => found.push(path.to_path_buf()),
    }
}

fn main() {
    let mut files = Vec::new();
    for source in SOURCES {
        // A folder's listing changes when a file is added or removed: that reruns this too.
        println!("cargo:rerun-if-changed={source}");
        files_under(Path::new(source), &mut files);
    }
    files.sort();
    let mut hasher = DefaultHasher::new();
    for file in &files {
        println!("cargo:rerun-if-changed={}", file.display());
        file.hash(&mut hasher);
        std::fs::read(file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display())).hash(&mut hasher);
    }
    println!("cargo:rustc-env=MORPH_GRAPH_FINGERPRINT={:016x}", hasher.finish());
}
