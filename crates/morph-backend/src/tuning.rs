//! Process settings that speed up the candle CPU engine, measured on a 2-core host
//! (`cargo bench -p morph-benches --bench engine_latency` prints both side by side):
//!
//! - glibc malloc keeps freed memory instead of returning it to the kernel
//!   (`mmap_threshold`, `trim_threshold`, `top_pad`): candle allocates a fresh buffer per
//!   op, and without these every large one is a new mmap and page faults. Minor page faults
//!   for b8·l512 fell 59× and latency 1.7×. All three are needed; each alone did little.
//! - `RAYON_NUM_THREADS` set explicitly: otherwise candle asks `num_cpus` on every matmul,
//!   which reads `/proc/cpuinfo` (7% of b1·l8 time in a profile).
//!
//! Both are read by the C library or crates at start-up, so they are applied by re-executing
//! the binary once with them in its environment (same PID; no unsafe code). Only processes
//! that run candle take them: the malloc settings keep memory freed after a large batch, and
//! ONNX Runtime (which has its own arena) gains nothing from them.

use std::os::unix::process::CommandExt;

/// Set on the re-executed process so that it does not re-execute again.
const MARKER: &str = "MORPH_TUNED";
/// Set by the user (or a benchmark's baseline) to run without the tuned environment.
pub const OPT_OUT: &str = "MORPH_NO_TUNING";
const MALLOC_TUNABLES: &str = "glibc.malloc.mmap_threshold=4294967295:glibc.malloc.trim_threshold=4294967295:glibc.malloc.top_pad=268435456";

/// The variables to add to the current environment; empty when there is nothing to do.
pub fn tuned_env() -> Vec<(&'static str, String)> {
    if std::env::var_os(MARKER).is_some() || std::env::var_os(OPT_OUT).is_some() {
        return Vec::new();
    }
    let mut vars = vec![(MARKER, "1".to_string())];
    let tunables = match std::env::var("GLIBC_TUNABLES") {
        Ok(user) if !user.is_empty() => format!("{user}:{MALLOC_TUNABLES}"),
        _ => MALLOC_TUNABLES.to_string(),
    };
    vars.push(("GLIBC_TUNABLES", tunables));
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        vars.push(("RAYON_NUM_THREADS", threads.to_string()));
    }
    vars
}

/// Re-executes the current binary with [`tuned_env`] unless it is already tuned or opted
/// out. Returns only if nothing was done or the exec failed (then the process goes on untuned).
pub fn reexec_tuned() {
    let vars = tuned_env();
    if vars.is_empty() {
        return;
    }
    let Ok(exe) = std::env::current_exe() else { return };
    let err = std::process::Command::new(exe).args(std::env::args_os().skip(1)).envs(vars).exec();
    eprintln!("warning: could not re-execute with the tuned environment ({err}); running untuned");
}
