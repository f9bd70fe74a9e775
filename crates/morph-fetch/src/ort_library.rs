//! The ONNX Runtime shared library, found or fetched like a model. In order: the path the
//! user gives (`--ort-library`), `ORT_DYLIB_PATH`, the copy cached in
//! `MORPH_HOME/onnxruntime/`, else the PyPI wheel `onnxruntime==1.31.0` (x86-64 Linux build,
//! `pip download --no-deps`, library checked against a pinned sha256) unpacked there.

use std::path::{Path, PathBuf};

use crate::model::install_wheel;
use crate::{FetchError, Pip, Wheel};

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
    install_wheel(pip, WHEEL, &|rel| rel == LIBRARY, &dir, (LIBRARY, LIBRARY_SHA256), &[])?;
    Ok(dir.join(LIBRARY))
}
