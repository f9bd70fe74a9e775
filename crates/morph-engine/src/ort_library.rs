//! The ONNX Runtime shared library, found or fetched like a model. In order: the path the
//! user gives (`--ort-library`), `ORT_DYLIB_PATH`, the copy cached in
//! `MORPH_HOME/onnxruntime/`, else the PyPI wheel `onnxruntime==1.31.0` (x86-64 Linux build,
//! `pip download --no-deps`, library checked against a pinned sha256) unpacked there.

use std::path::{Path, PathBuf};

use crate::fetch::{FetchError, Pip, Wheel, io_err, tempfile_dir, unzip_wheel, verify_sha256};

/// The ONNX Runtime release Morph is built against (the `ort` crate's API level).
pub const ORT_VERSION: &str = "1.31.0";
const LIBRARY: &str = "libonnxruntime.so.1.31.0";
const LIBRARY_SHA256: &str = "21901b1b02233484b80888c16f4f5473742f796bf5528d5d0c4073dbe9802001";
/// The environment variable naming a library to use instead of fetching one.
pub const ORT_DYLIB_PATH: &str = "ORT_DYLIB_PATH";

const WHEEL: Wheel = Wheel {
    spec: "onnxruntime==1.31.0",
    args: &[
        "--only-binary=:all:",
        "--platform",
        "manylinux_2_28_x86_64",
        "--python-version",
        "3.11",
        "--implementation",
        "cp",
        "--abi",
        "cp311",
    ],
    prefix: "onnxruntime/capi/",
    what: "the ONNX Runtime library",
    instead: "set ORT_DYLIB_PATH to a libonnxruntime.so of ONNX Runtime 1.31 (or pass --ort-library)",
};

/// Path of the ONNX Runtime library to load, fetching it into `home` if nothing else is given.
pub fn onnxruntime_library(explicit: Option<&Path>, home: &Path, pip: &Pip) -> Result<PathBuf, FetchError> {
    let given = explicit
        .map(|p| (p.to_path_buf(), "--ort-library"))
        .or_else(|| std::env::var_os(ORT_DYLIB_PATH).map(|p| (PathBuf::from(p), ORT_DYLIB_PATH)));
    if let Some((path, from)) = given {
        if path.is_file() {
            return Ok(path);
        }
        return Err(FetchError::NoLibrary { path, from });
    }
    if !(cfg!(target_os = "linux") && cfg!(target_arch = "x86_64")) {
        return Err(FetchError::Unsupported { instead: WHEEL.instead });
    }
    let dir = home.join("onnxruntime").join(ORT_VERSION);
    let library = dir.join(LIBRARY);
    if !library.is_file() {
        std::fs::create_dir_all(&dir).map_err(io_err(format!("creating {}", dir.display())))?;
        let staging = tempfile_dir(&dir)?;
        pip.download(WHEEL, staging.path())?;
        let unpacked = staging.path().join("lib");
        unzip_wheel(staging.path(), WHEEL, &|rel| rel == LIBRARY, &unpacked)?;
        verify_sha256(&unpacked.join(LIBRARY), LIBRARY_SHA256)?;
        // Another process may have finished first; its copy is as good as ours.
        if std::fs::rename(unpacked.join(LIBRARY), &library).is_err() && !library.is_file() {
            return Err(FetchError::Io {
                context: format!("moving the library into {}", dir.display()),
                source: std::io::Error::other("rename failed"),
            });
        }
    }
    verify_sha256(&library, LIBRARY_SHA256)?;
    Ok(library)
}
